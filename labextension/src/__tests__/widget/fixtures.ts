// Small view models, typed by the contracts: what Python sends (tests/test_contracts.py
// checks Python's panes against the same types).
import type {
  IFitModel,
  IHeader,
  IHintsModel,
  IIrPane,
  IJaxprPane,
  IOverviewPane,
  IRunPane,
  ISourceWindow,
  ITabInfo,
  ITilesKernel,
  ITilesOperand
} from '../../contracts';

export const XSS = '<img src=x onerror="window.__pwned=1">';

export const HEADER: IHeader = {
  name: 'add',
  backend: 'cpu',
  mode: 'emulated',
  kernels: [{ name: 'add_kernel', grid: [2] }],
  check: true
};

export const TABS: ITabInfo[] = [
  { id: 'overview', title: 'Kernels' },
  { id: 'source', title: 'Source' },
  { id: 'jaxpr', title: 'Jaxpr' },
  { id: 'run', title: 'Run' }
];

export const FILE: ISourceWindow = {
  file: '/tmp/cell.py',
  label: 'Cell [3]',
  first: 1,
  lines: [
    'def add_kernel(x_ref, y_ref, o_ref):',
    '    o_ref[...] = x_ref[...] + y_ref[...]',
    '',
    'add = pl.pallas_call(add_kernel, grid=(2,))'
  ],
  marks: [
    { line: 1, kind: 'kernel', text: 'kernel add_kernel' },
    { line: 4, kind: 'call', text: 'runs add_kernel' }
  ]
};

export function hints(masks: boolean): IHintsModel {
  return {
    hints: [
      {
        id: 'small-grid',
        severity: 'warning',
        message: 'The grid runs 2 programs.',
        location: { label: 'Cell [3]', line: 4 },
        figures: [['programs', '2']],
        chip: 'H100'
      }
    ],
    masks
  };
}

export function fit(compiled: boolean): IFitModel {
  return {
    rows: [
      {
        chip: 'v5e',
        target: 'tpu-compile:v5e',
        memory: 'VMEM',
        needed: '16.1 MiB',
        neededFrom: compiled ? 'read' : 'estimated',
        limit: '16 MiB',
        limitFrom: "v5e's default scoped VMEM",
        capacity: '128 MiB',
        verdict: 'fits-with-limit',
        verdictText: 'fits only with vmem_limit_bytes >= 16,908,288',
        vmemLimitBytes: 16908288,
        message:
          'fits only with pltpu.CompilerParams(vmem_limit_bytes=16,908,288)'
      },
      {
        chip: 'H100',
        target: 'xla-gpu:H100',
        memory: 'shared memory',
        needed: compiled ? '48 KiB' : '',
        neededFrom: compiled ? 'read' : '',
        limit: '227 KiB',
        limitFrom: 'shared memory a block may opt in to',
        capacity: '228 KiB',
        verdict: compiled ? 'fits' : 'unknown',
        verdictText: compiled ? 'fits' : 'unknown',
        vmemLimitBytes: null,
        message: compiled ? 'fits' : 'not compiled for this chip yet'
      }
    ],
    compiled
  };
}

export function overview(masks = true): IOverviewPane {
  return {
    program: {
      name: 'add',
      args: [
        { path: 'x', type: 'f32[256]' },
        { path: 'y', type: 'f32[256]' }
      ],
      outputs: [{ path: 'out', type: 'f32[256]' }]
    },
    kernels: [
      {
        index: 0,
        name: XSS,
        kind: 'pallas_call',
        kindText: '',
        grid: [2],
        gridNames: null,
        programs: 2,
        source: { label: 'Cell [3]', line: 1 },
        callSite: null,
        backend: 'triton',
        params: [['num_warps', '4']],
        semantics: null,
        cost: null,
        interpret: '',
        vmapped: [],
        path: [],
        aliases: [],
        operands: [
          {
            role: 'in',
            label: 'x_ref',
            origin: 'x',
            type: 'f32[256]',
            block: '(128,)',
            blockBytes: '512 B',
            indexMap: 'lambda i: (i,)',
            memory: 'default',
            buffers: null
          }
        ],
        races: {
          gpu: {
            sentences: [
              'GPU: no races: no two programs write the same output block.'
            ],
            conflicts: [],
            total: 0,
            checked: true
          }
        },
        hints: hints(masks),
        fit: fit(true),
        facts: ['grid (2) = 2 programs', 'defined at Cell [3] line 1'],
        details: ['compiler params (triton): num_warps=4']
      }
    ],
    notices: ['a notice']
  };
}

export const JAXPR: IJaxprPane = {
  views: [
    {
      id: 'kernel0',
      title: 'kernel add_kernel',
      text: '{ lambda ; a:f32[128]. let\n    c:f32[128] = add a b\n  in () }',
      map: [[2, 0, 2]],
      lines: 3,
      clipped: false
    }
  ],
  files: [FILE]
};

export const RUN: IRunPane = {
  message: '',
  result: {
    backend: 'cpu',
    mode: 'emulated',
    seconds: '12.0 ms',
    note: 'CPU emulation',
    inputs: '',
    notices: [],
    leaks: [
      {
        title: 'Padding leak',
        text: 'o_ref reads padding',
        kernel: 'k',
        output: 'out',
        source: 'x',
        cause: 'padding',
        tiles: [[1]],
        where: { label: 'Cell [3]', line: 2 }
      }
    ],
    outOfBounds: [],
    raceChecks: [
      {
        text: 'a race',
        kernel: 'k',
        backend: 'gpu',
        confirmed: true,
        tiles: [['out', [0]]]
      }
    ],
    interpreterRaces: [
      {
        text: 'k: race on a SMEM buffer',
        kernel: 'k',
        memory: 'SMEM',
        where: { label: 'Cell [3]', line: 4 },
        otherWhere: { label: 'Cell [3]', line: 5 }
      }
    ],
    outputs: [
      {
        path: 'out',
        type: 'f32[256]',
        preview: '[0. 1. 2.]',
        min: '0',
        max: '255',
        nan: 0,
        inf: 0
      }
    ],
    comparison: {
      ok: false,
      maxAbs: '1',
      maxRel: '1',
      rtol: '1e-05',
      atol: '1e-05',
      mismatched: 128,
      problem: '',
      verdict: '\u2717 does not match the reference',
      detail: 'max abs error 1',
      tiles: [
        {
          output: 'out',
          kernel: 'k',
          operand: 'o_ref',
          shape: [256],
          tileShape: [128],
          tiles: [2],
          rowLabel: '',
          colLabel: 'block',
          pool: [1, 1],
          perTile: 128,
          counts: [[0, 128]],
          nonfinite: [[0, 0]],
          badTiles: [[1]],
          badTileCount: 1,
          badPrograms: [[1]],
          badProgramCount: 1,
          grid: [2],
          pattern: 'the last block',
          nan: 0,
          inf: 0,
          referenceNonfinite: 0,
          note: '',
          description: '1 of 2 blocks of output out differ: the last block.'
        }
      ]
    }
  }
};

export const IR: IIrPane = {
  kernels: [
    {
      index: 0,
      name: 'add_kernel',
      backend: 'triton',
      kind: 'pallas_call',
      defaultTarget: 'triton'
    }
  ],
  targets: [
    {
      name: 'triton',
      title: 'Triton IR',
      group: 'GPU',
      kind: 'triton',
      stage: 'ttir',
      arch: 'sm_90',
      language: 'mlir',
      program: false,
      unavailable: ''
    },
    {
      name: 'llo:v5e',
      title: 'LLO',
      group: 'TPU',
      kind: 'tpu-compile',
      stage: '',
      arch: 'v5e',
      language: 'llo',
      program: false,
      unavailable: ''
    }
  ],
  initial: { kernel: 0, target: 'triton' },
  files: [FILE]
};

/** Base64 of little-endian bytes. */
export function b64(bytes: number[]): string {
  return btoa(String.fromCharCode(...bytes));
}

/** A 1-D operand of 256 elements in blocks of 128, program i reading block i. */
export function operand(index: number, role: 'in' | 'out'): ITilesOperand {
  return {
    index,
    label: role === 'in' ? 'x_ref' : 'o_ref',
    role,
    access: 'pipelined',
    reason: '',
    shape: [256],
    type: 'f32[256]',
    block: '(128,)',
    blockShape: [128],
    kinds: ['blocked'],
    indexMap: 'lambda i: (i,)',
    memory: 'vmem',
    dims: { rows: null, cols: 0, sliced: [] },
    mapped: true,
    starts: [{ dtype: 'u8', shape: [2], data: b64([0, 128]) }],
    extents: [{ dtype: 'u8', shape: [2], data: b64([128, 128]) }],
    coverage: {
      edges: [{ dtype: 'u16', shape: [3], data: b64([0, 0, 128, 0, 0, 1]) }],
      counts: { dtype: 'u8', shape: [2], data: b64([1, 1]) },
      merged: false,
      min: 1,
      max: 1,
      mean: 1,
      never: 0
    },
    bounds: { rows: [0, 1], cols: [0, 256] },
    revisitAxes: []
  };
}

const MERIT = {
  operands: [],
  bytes: 2048,
  bytesText: '2 KiB',
  minBytesText: '2 KiB',
  ratio: 1,
  workingSet: 1024,
  workingSetText: '1 KiB',
  smemText: '1 KiB',
  flops: null,
  flopsText: 'unknown',
  flopsSource: '',
  flopsExact: false,
  intensity: null,
  computeDtype: 'f32'
};

const FIT = {
  chip: 'v5e',
  capacity: 1 << 27,
  capacityText: '128 MiB',
  capacityName: 'VMEM',
  fits: true,
  share: 0.0001,
  peakText: '197 TFLOP/s',
  peakName: 'bf16',
  bandwidthText: '819 GB/s',
  ridge: 240,
  intensity: null,
  bound: 'memory',
  attainableText: '',
  secondsText: '3 ns',
  notes: []
};

export const TILES_KERNEL: ITilesKernel = {
  index: 0,
  name: 'add_kernel',
  grid: [2],
  axisNames: ['i'],
  programs: 2,
  stride: [1],
  shown: [2],
  shownPrograms: 2,
  table: true,
  schedule: 'tpu',
  semantics: null,
  order: {
    tpu: 'TPU: programs run one after another.',
    gpu: 'GPU: all at once.'
  },
  operands: [operand(0, 'in'), operand(1, 'out')],
  merit: { tpu: MERIT, gpu: MERIT },
  fits: { tpu: [FIT], gpu: [{ ...FIT, chip: 'H100' }] },
  defaultChip: { tpu: 'v5e', gpu: 'H100' },
  notices: [],
  dtypes: ['f32']
};
