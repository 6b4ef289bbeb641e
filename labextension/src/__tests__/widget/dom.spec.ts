/**
 * @jest-environment jsdom
 */
// Every string reaches the page as text: the DOM helpers never parse HTML.
import { clear, h, svg, table } from '../../widget/dom';
import { XSS } from './fixtures';

describe('DOM helpers', () => {
  it('write strings as text, in text, children, attributes and tables', () => {
    const node = h('p', { text: XSS, title: XSS, dataset: { x: XSS } });
    expect(node.querySelector('img')).toBeNull();
    expect(node.textContent).toBe(XSS);
    expect(node.title).toBe(XSS);
    expect(node.dataset.x).toBe(XSS);
    const parent = h('div', {}, XSS, [h('b', { text: XSS })], null, false);
    expect(parent.querySelector('img')).toBeNull();
    expect(parent.textContent).toBe(XSS + XSS);
    const cells = table([XSS], [[XSS, h('code', { text: XSS })]]);
    expect(cells.querySelector('img')).toBeNull();
    expect(cells.querySelectorAll('td')).toHaveLength(2);
    const picture = svg('svg', {}, svg('title', {}, XSS));
    expect(picture.querySelector('img')).toBeNull();
    expect(picture.namespaceURI).toBe('http://www.w3.org/2000/svg');
  });

  it('attach listeners and clear nodes', () => {
    let clicks = 0;
    const button = h('button', { onclick: () => clicks++ });
    button.click();
    expect(clicks).toBe(1);
    const node = h('div', {}, 'a', h('span'));
    expect(clear(node).childNodes).toHaveLength(0);
  });
});
