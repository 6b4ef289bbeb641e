/**
 * Kernel templates: whole notebooks (for the launcher and the palette) and the
 * kernel cell alone (to insert into the current notebook). The texts live in
 * templates.json, which the Python tests run through pallaslab on CPU.
 */

import data from './templates.json';

/** One cell of a template. */
export interface ITemplateCell {
  cell_type: 'code' | 'markdown';
  source: string[];
  /** The cell that holds the kernel (what "insert" adds). */
  kernel?: boolean;
}

/** A template: a small notebook around one kernel. */
export interface ITemplate {
  id: string;
  title: string;
  caption: string;
  cells: ITemplateCell[];
}

/** Every template, in menu order. */
export const TEMPLATES: ITemplate[] = (data as { templates: ITemplate[] })
  .templates;

/** The line that loads pallaslab into IPython. */
export const LOAD_LINE = '%load_ext pallaslab';

/** A template by id; throws naming the known ids for an unknown one. */
export function templateById(id: string): ITemplate {
  const template = TEMPLATES.find(t => t.id === id);
  if (!template) {
    throw new Error(
      `no pallaslab template '${id}'; known: ${TEMPLATES.map(t => t.id).join(', ')}`
    );
  }
  return template;
}

/** A cell's text. */
export function cellText(cell: ITemplateCell): string {
  return cell.source.join('\n');
}

/** Whether some cell of a notebook already loads pallaslab. */
export function loadsPallaslab(cellSources: string[]): boolean {
  return cellSources.some(source =>
    source.split('\n').some(line => /^\s*%load_ext\s+pallaslab\s*$/.test(line))
  );
}

/** The cells "insert" adds to a notebook: the kernel cell, after a load cell if needed. */
export function cellsToInsert(
  template: ITemplate,
  existing: string[]
): ITemplateCell[] {
  const kernelCells = template.cells.filter(cell => cell.kernel);
  if (loadsPallaslab(existing)) {
    return kernelCells;
  }
  return [{ cell_type: 'code', source: [LOAD_LINE] }, ...kernelCells];
}

/** An nbformat 4 notebook of a template. */
export function notebookOf(
  template: ITemplate,
  kernelspec: { name: string; display_name: string; language?: string } | null
): { [key: string]: any } {
  return {
    nbformat: 4,
    nbformat_minor: 5,
    metadata: {
      ...(kernelspec
        ? { kernelspec: { language: 'python', ...kernelspec } }
        : {}),
      language_info: { name: 'python' },
      pallaslab: { template: template.id }
    },
    cells: template.cells.map((cell, index) => ({
      id: `${template.id}-${index}`,
      cell_type: cell.cell_type,
      metadata: {},
      source: cellText(cell),
      ...(cell.cell_type === 'code'
        ? { outputs: [], execution_count: null }
        : {})
    }))
  };
}

/** A file name for a new notebook of a template that is not taken yet. */
export function freeName(template: ITemplate, taken: Set<string>): string {
  const base = template.id.replace(/-/g, '_');
  for (let n = 0; ; n++) {
    const name = n === 0 ? `${base}.ipynb` : `${base}_${n}.ipynb`;
    if (!taken.has(name)) {
      return name;
    }
  }
}
