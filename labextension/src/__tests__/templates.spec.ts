import {
  cellsToInsert,
  freeName,
  LOAD_LINE,
  loadsPallaslab,
  notebookOf,
  templateById,
  TEMPLATES
} from '../templates';

describe('templates', () => {
  it('are the four the launcher promises, each with one kernel cell', () => {
    expect(TEMPLATES.map(t => t.id)).toEqual([
      'vector-add',
      'tiled-matmul',
      'softmax',
      'flash-attention'
    ]);
    for (const template of TEMPLATES) {
      const kernels = template.cells.filter(cell => cell.kernel);
      expect(kernels).toHaveLength(1);
      expect(kernels[0].source[0]).toMatch(/^%%kernel \w+\(.*\) --ref /);
      expect(
        template.cells.some(cell => cell.source.join('\n') === LOAD_LINE)
      ).toBe(true);
    }
  });

  it('names unknown templates and the known ones', () => {
    expect(() => templateById('fft')).toThrow(
      /no pallaslab template 'fft'; known: vector-add/
    );
  });

  it('inserts a load cell only when the notebook lacks one', () => {
    const matmul = templateById('tiled-matmul');
    expect(
      cellsToInsert(matmul, ['import numpy']).map(c => c.source[0])
    ).toEqual([LOAD_LINE, matmul.cells.find(c => c.kernel)!.source[0]]);
    expect(cellsToInsert(matmul, ['x = 1\n%load_ext pallaslab'])).toHaveLength(
      1
    );
    expect(loadsPallaslab(['%load_ext pallaslab_other'])).toBe(false);
  });

  it('makes nbformat 4 notebooks', () => {
    const notebook = notebookOf(templateById('softmax'), {
      name: 'python3',
      display_name: 'Python 3'
    });
    expect(notebook.nbformat).toBe(4);
    expect(notebook.metadata.kernelspec).toEqual({
      language: 'python',
      name: 'python3',
      display_name: 'Python 3'
    });
    const code = notebook.cells.filter((c: any) => c.cell_type === 'code');
    expect(
      code.every(
        (c: any) => Array.isArray(c.outputs) && c.execution_count === null
      )
    ).toBe(true);
    expect(
      notebook.cells
        .filter((c: any) => c.cell_type === 'markdown')
        .every((c: any) => !('outputs' in c))
    ).toBe(true);
    expect(new Set(notebook.cells.map((c: any) => c.id)).size).toBe(
      notebook.cells.length
    );
  });

  it('picks free file names', () => {
    const template = templateById('flash-attention');
    expect(freeName(template, new Set())).toBe('flash_attention.ipynb');
    expect(
      freeName(
        template,
        new Set(['flash_attention.ipynb', 'flash_attention_1.ipynb'])
      )
    ).toBe('flash_attention_2.ipynb');
  });
});
