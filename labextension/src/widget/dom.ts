/**
 * DOM helpers for the widget. Every string reaches the page as a text node or an
 * attribute value: no HTML is ever parsed.
 */

/** What an element may be given: text, attributes, listeners, data attributes. */
export interface IProps {
  class?: string;
  text?: string | number;
  title?: string;
  dataset?: { [key: string]: string | number };
  style?: string;
  [attribute: string]: unknown;
}

/** A child: a node, text, or nothing (null, undefined and false are left out). */
export type Child = Node | string | number | null | undefined | false | Child[];

/** Appends children (text, nodes, nested lists; nothing for null and false). */
export function append(node: Node, children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) {
      continue;
    }
    if (Array.isArray(child)) {
      append(node, child);
    } else if (child instanceof Node) {
      node.appendChild(child);
    } else {
      node.appendChild(document.createTextNode(String(child)));
    }
  }
}

function setProps(node: Element, props: IProps): void {
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) {
      continue;
    }
    if (key === 'class') {
      node.setAttribute('class', String(value));
    } else if (key === 'text') {
      node.textContent = String(value);
    } else if (key === 'dataset') {
      for (const [name, v] of Object.entries(value as object)) {
        (node as HTMLElement).dataset[name] = String(v);
      }
    } else if (key.startsWith('on') && typeof value === 'function') {
      node.addEventListener(key.slice(2), value as EventListener);
    } else {
      node.setAttribute(key, String(value));
    }
  }
}

/** An HTML element with props and children. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props?: IProps | null,
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  setProps(node, props ?? {});
  append(node, children);
  return node;
}

const SVG_NS = 'http://www.w3.org/2000/svg';

/** An SVG element with attributes and children. */
export function svg(
  tag: string,
  props?: IProps | null,
  ...children: Child[]
): SVGElement {
  const node = document.createElementNS(SVG_NS, tag) as SVGElement;
  setProps(node, props ?? {});
  append(node, children);
  return node;
}

/** Removes every child of a node. */
export function clear<T extends Node>(node: T): T {
  while (node.firstChild) {
    node.removeChild(node.firstChild);
  }
  return node;
}

/** A table: a row of headings, then rows of cells (text or nodes). */
export function table(
  headings: string[],
  rows: (Node | string | number | null | undefined)[][]
): HTMLTableElement {
  return h(
    'table',
    { class: 'pl-table' },
    h('thead', {}, h('tr', {}, ...headings.map(x => h('th', { text: x })))),
    h(
      'tbody',
      {},
      ...rows.map(cells =>
        h(
          'tr',
          {},
          ...cells.map(c =>
            c instanceof Node ? h('td', {}, c) : h('td', { text: c ?? '' })
          )
        )
      )
    )
  );
}

/** "1 kernel", "2 kernels". */
export function plural(count: number, word: string): string {
  return `${count} ${word}${count === 1 ? '' : 's'}`;
}
