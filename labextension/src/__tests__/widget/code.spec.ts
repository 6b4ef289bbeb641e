/**
 * @jest-environment jsdom
 */
// Code views, line links between a text and its sources, and "Open in new tab".
import {
  CodeView,
  linkViews,
  openTextButton,
  requestText
} from '../../widget/code';
import { JAXPR } from '../../widget/tabs/jaxpr';
import { SOURCE } from '../../widget/tabs/source';
import { fakeContext, settle } from './fakes';
import { FILE, JAXPR as JAXPR_PANE, XSS } from './fixtures';

afterEach(() => {
  delete (globalThis as { __pallaslabLab?: boolean }).__pallaslabLab;
});

describe('code views', () => {
  it('number, highlight and mark lines, as text', () => {
    const view = new CodeView({
      lines: [`x = '${XSS}'  # note`],
      first: 7,
      language: 'python',
      marks: [{ line: 7, kind: 'kernel', text: XSS }],
      title: XSS
    });
    expect(view.el.querySelector('.pl-ln')?.textContent).toBe('7');
    expect(view.el.querySelector('.pl-tok-string')?.textContent).toBe(
      `'${XSS}'`
    );
    expect(view.el.querySelector('.pl-tok-comment')?.textContent).toBe(
      '# note'
    );
    expect(view.el.querySelector('.pl-mark-kernel')?.textContent).toBe(
      `\u2190 ${XSS}`
    );
    expect(view.el.querySelector('img')).toBeNull();
  });

  it('link text lines to source lines both ways, and pin on click', () => {
    const text = new CodeView({ lines: ['a', 'b', 'c'] });
    const source = new CodeView({ lines: ['s1', 's2'], first: 10 });
    const linker = linkViews(
      text,
      [source],
      [
        [2, 0, 11],
        [3, 0, 11]
      ]
    );
    const active = (view: CodeView) =>
      Array.from(view.el.querySelectorAll('.pl-active')).map(
        r => (r as HTMLElement).dataset.line
      );
    expect(
      (text.el.querySelector('[data-line="2"]') as HTMLElement).dataset.colour
    ).toBe('0');
    linker.onTextHover(2);
    expect(active(source)).toEqual(['11']);
    linker.onSourceHover(0, 11);
    expect(active(text)).toEqual(['2', '3']);
    linker.onTextClick(3);
    linker.onTextHover(null);
    expect(active(source)).toEqual(['11']);
    linker.onTextClick(3);
    linker.onTextHover(null);
    expect(active(source)).toEqual([]);
  });
});

describe('open in new tab', () => {
  it('is offered only where JupyterLab listens', () => {
    expect(
      openTextButton(() => ({
        title: '',
        language: '',
        text: '',
        sourceMap: [],
        sources: []
      }))
    ).toBeNull();
  });

  it('dispatches a bubbling, composed event with the text and its links', async () => {
    (globalThis as { __pallaslabLab?: boolean }).__pallaslabLab = true;
    const detail = {
      title: 'jaxpr',
      language: 'jaxpr',
      text: 'a\nb',
      sourceMap: [[1, 0, 3]] as [number, number, number][],
      sources: [{ label: 'Cell [1]', first: 1, lines: ['x'] }]
    };
    const button = openTextButton(() => detail)!;
    const host = document.createElement('div');
    host.append(button);
    document.body.append(host);
    const seen: CustomEvent[] = [];
    document.addEventListener('pallaslab:open-text', e =>
      seen.push(e as CustomEvent)
    );
    button.click();
    await settle();
    expect(seen).toHaveLength(1);
    expect(seen[0].bubbles && seen[0].composed).toBe(true);
    expect(seen[0].detail).toEqual(detail);
    host.remove();
  });

  it('fetches a whole long text in pieces', async () => {
    const ctx = fakeContext(body => {
      if ('textKey' in body && body.chunk < 0) {
        return {
          title: 't',
          language: 'jaxpr',
          sourceMap: [],
          sources: [],
          chunks: 2
        };
      }
      return { index: 0, text: 'chunk' in body ? `piece${body.chunk}` : '' };
    });
    const whole = await requestText(ctx.request, 'kernel0');
    expect(whole.text).toBe('piece0piece1');
    expect(ctx.asked).toHaveLength(3);
    const failing = fakeContext(() => ({ error: 'no such text' }));
    await expect(requestText(failing.request, 'x')).rejects.toThrow(
      'no such text'
    );
  });
});

describe('the Source and Jaxpr tabs', () => {
  it('draw the sources with their marks', () => {
    const root = document.createElement('div');
    SOURCE.render(
      root,
      { files: [FILE] },
      fakeContext(() => ({ error: '' }))
    );
    expect(root.querySelector('.pl-code-title')?.textContent).toBe('Cell [3]');
    expect(root.querySelectorAll('.pl-line')).toHaveLength(4);
    expect(root.querySelector('.pl-mark-call')?.textContent).toContain(
      'runs add_kernel'
    );
  });

  it('link the jaxpr to its source on hover', () => {
    const root = document.createElement('div');
    JAXPR.render(
      root,
      JAXPR_PANE,
      fakeContext(() => ({ error: '' }))
    );
    const [left, right] = Array.from(
      root.querySelectorAll('.pl-split > .pl-pane')
    );
    const add = right.querySelector('.pl-line[data-line="2"]') as HTMLElement;
    expect(add.querySelector('.pl-tok-op')?.textContent).toBe('add');
    add.dispatchEvent(new Event('mouseenter'));
    expect(left.querySelector('.pl-line.pl-active')?.textContent).toContain(
      'o_ref[...] = x_ref[...] + y_ref[...]'
    );
    expect(root.querySelector('.pl-open-text')).toBeNull();
  });
});
