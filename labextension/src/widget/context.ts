/**
 * What a tab's renderer is given: the widget's model, state kept across redraws,
 * and `request`, which asks Python for more (answered by the tab's `respond` or
 * by `views/texts.py` for whole texts).
 */

import type { PaneId, TabReply, TabRequestBody } from '../contracts';

/** The part of anywidget's model the widgets use. */
export interface IWidgetModel {
  get(name: string): any;
  set(name: string, value: unknown): void;
  save_changes(): void;
  on(event: string, callback: (...args: any[]) => void): void;
  off(event: string, callback: (...args: any[]) => void): void;
  send(content: unknown): void;
}

/** Asks Python; resolves with its reply (an error reply if it never answers). */
export type Requester = (
  body: TabRequestBody,
  timeoutMs?: number
) => Promise<TabReply>;

/** The second argument of a tab's renderer. */
export interface ITabContext {
  model: IWidgetModel;
  /** Survives redraws of the pane (the picked view, the scrubber's position ...). */
  state: { [key: string]: any };
  request: Requester;
  tab: PaneId;
}

/** A tab's renderer: draws its pane's model into `root`. */
export interface ITabRenderer<Model> {
  render(root: HTMLElement, data: Model, ctx: ITabContext): void;
}

/** Whether a reply is an error. */
export function isError(reply: unknown): reply is { error: string } {
  return (
    typeof reply === 'object' &&
    reply !== null &&
    typeof (reply as { error?: unknown }).error === 'string'
  );
}
