// Test doubles for the widget: anywidget's model, canvas contexts, a tab context.
import type { TabReply, TabRequestBody } from '../../contracts';
import { ITabContext, IWidgetModel } from '../../widget/context';

/** anywidget's model: traits, events, sent messages. */
export class FakeModel implements IWidgetModel {
  constructor(traits: { [name: string]: unknown }) {
    this.traits = { ...traits };
  }

  traits: { [name: string]: unknown };
  sent: unknown[] = [];
  saves = 0;
  private handlers = new Map<string, Set<(...args: any[]) => void>>();

  get(name: string): any {
    return this.traits[name];
  }

  set(name: string, value: unknown): void {
    this.traits[name] = value;
    this.emit(`change:${name}`);
  }

  save_changes(): void {
    this.saves++;
  }

  on(event: string, callback: (...args: any[]) => void): void {
    if (!this.handlers.has(event)) {
      this.handlers.set(event, new Set());
    }
    this.handlers.get(event)!.add(callback);
  }

  off(event: string, callback: (...args: any[]) => void): void {
    this.handlers.get(event)?.delete(callback);
  }

  send(content: unknown): void {
    this.sent.push(content);
  }

  emit(event: string, ...args: unknown[]): void {
    for (const callback of this.handlers.get(event) ?? []) {
      callback(...args);
    }
  }

  listeners(event: string): number {
    return this.handlers.get(event)?.size ?? 0;
  }
}

/** A tab context whose requests are answered by `answer` (and recorded). */
export function fakeContext(
  answer: (body: TabRequestBody) => TabReply | Promise<TabReply>
): ITabContext & { asked: TabRequestBody[] } {
  const asked: TabRequestBody[] = [];
  return {
    model: new FakeModel({}),
    state: {},
    tab: 'overview',
    asked,
    request: async (body: TabRequestBody) => {
      asked.push(body);
      return answer(body);
    }
  };
}

/** A 2-D context that records what is drawn (jsdom has no canvas). */
export function installFakeCanvas(): { calls: [string, unknown[]][] } {
  const log = { calls: [] as [string, unknown[]][] };
  const context = new Proxy(
    {},
    {
      get(target: any, name: string) {
        if (name in target) {
          return target[name];
        }
        return (...args: unknown[]) => {
          log.calls.push([name, args]);
          if (name === 'createPattern') {
            return 'pattern';
          }
          if (name === 'getImageData') {
            return { data: [] };
          }
          return undefined;
        };
      },
      set(target: any, name: string, value: unknown) {
        target[name] = value;
        log.calls.push([`set ${name}`, [value]]);
        return true;
      }
    }
  );
  HTMLCanvasElement.prototype.getContext = (() => context) as any;
  return log;
}

/** Lets promises and zero-delay timers run. */
export async function settle(ms = 0): Promise<void> {
  await new Promise(resolve => setTimeout(resolve, ms));
  await Promise.resolve();
}
