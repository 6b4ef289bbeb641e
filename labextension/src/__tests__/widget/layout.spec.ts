/**
 * @jest-environment jsdom
 */
// Jaxpr and IR panes: full width on demand, long lines wrapped on demand, resizable.
import { readFileSync } from 'fs';
import { join } from 'path';
import { IR } from '../../widget/tabs/ir';
import { JAXPR } from '../../widget/tabs/jaxpr';
import { fakeContext } from './fakes';
import { IR as IR_PANE, JAXPR as JAXPR_PANE } from './fixtures';

const CSS = readFileSync(
  join(__dirname, '..', '..', 'widget', 'inspector.css'),
  'utf-8'
);

function tick(box: HTMLInputElement, checked: boolean): void {
  box.checked = checked;
  box.dispatchEvent(new Event('change'));
}

describe('code panes', () => {
  it('put the jaxpr at full width and wrap its lines when asked, and keep the choice', () => {
    const root = document.createElement('div');
    const ctx = fakeContext(() => ({ error: '' }));
    JAXPR.render(root, JAXPR_PANE, ctx);
    const panes = root.querySelector('.pl-split')!;
    expect(panes.classList.contains('pl-stacked')).toBe(false);
    expect(panes.classList.contains('pl-wrap')).toBe(false);
    tick(root.querySelector('.pl-layoutStacked') as HTMLInputElement, true);
    tick(root.querySelector('.pl-wrapLines') as HTMLInputElement, true);
    expect(panes.classList.contains('pl-stacked')).toBe(true);
    expect(panes.classList.contains('pl-wrap')).toBe(true);
    const again = document.createElement('div');
    JAXPR.render(again, JAXPR_PANE, ctx);
    const redrawn = again.querySelector('.pl-split')!;
    expect(redrawn.className).toBe('pl-split pl-stacked pl-wrap');
    expect(
      (again.querySelector('.pl-wrapLines') as HTMLInputElement).checked
    ).toBe(true);
  });

  it('offer the IR full width, and scroll its long lines sideways', () => {
    const root = document.createElement('div');
    IR.render(
      root,
      IR_PANE,
      fakeContext(() => ({ error: '' }))
    );
    expect(root.querySelector('.pl-layoutStacked')).not.toBeNull();
    // The IR view draws only the rows in sight: wrapping would break its row height.
    expect(root.querySelector('.pl-wrapLines')).toBeNull();
  });

  it('lift the height cap when dragged', () => {
    const root = document.createElement('div');
    JAXPR.render(
      root,
      JAXPR_PANE,
      fakeContext(() => ({ error: '' }))
    );
    const body = root.querySelector(
      '.pl-split > .pl-pane:last-child .pl-code-body'
    ) as HTMLElement;
    body.dispatchEvent(new MouseEvent('mousedown'));
    expect(body.style.maxHeight).toBe('none');
    expect(body.style.height).toBe('0px');
  });

  it('are styled so: text first at full width, wrapped lines, resizable height', () => {
    const rule = (selector: string) => {
      const start = CSS.indexOf(`${selector} {`);
      expect(start).toBeGreaterThanOrEqual(0);
      return CSS.slice(start, CSS.indexOf('}', start));
    };
    expect(rule('.pallaslab .pl-split.pl-stacked')).toContain(
      'grid-template-columns: minmax(0, 1fr)'
    );
    expect(
      rule('.pallaslab .pl-split.pl-stacked > .pl-pane:last-child')
    ).toContain('order: -1');
    expect(
      rule(
        '.pallaslab .pl-split.pl-wrap .pl-code-body:not(.pl-virtual) .pl-line'
      )
    ).toContain('white-space: pre-wrap');
    expect(rule('.pallaslab .pl-code-body')).toContain('resize: vertical');
  });
});
