import { tokenizeLine, TokenClass } from '../grammar';
import { grammarFor, GRAMMAR_SPECS, MLIR_DIALECTS } from '../grammars';

/** The class of the token that covers the first occurrence of `text` in `line`. */
function classOf(
  language: string,
  line: string,
  text: string
): TokenClass | null | 'split' {
  const grammar = grammarFor(language);
  if (!grammar) {
    throw new Error(language);
  }
  const at = line.indexOf(text);
  if (at < 0) {
    throw new Error(`${text} not in ${line}`);
  }
  let pos = 0;
  for (const [cls, piece] of tokenizeLine(grammar, line)) {
    if (pos <= at && at < pos + piece.length) {
      return at + text.length <= pos + piece.length ? cls : 'split';
    }
    pos += piece.length;
  }
  return null;
}

describe('MLIR', () => {
  const ttir = [
    '  tt.func public @add_kernel(%arg0: !tt.ptr<f32> {tt.divisibility = 16 : i32} loc("/tmp/k.py":10:0)) attributes {noinline = false} {',
    '    %c128_i32 = arith.constant 128 : i32 loc(#loc1)',
    '    %2 = tt.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32> loc(#loc4)',
    '    %9 = tt.load %8, %6 : tensor<128x!tt.ptr<f32>> loc(#loc9)',
    '    scf.for %arg3 = %c0_i32 to %c4_i32 step %c1_i32 iter_args(%arg4 = %cst) -> (tensor<64x64xf32>)  : i32 {',
    '#loc1 = loc("/tmp/k.py":12:20)',
    '#blocked = #ttg.blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>',
    'module attributes {"ttg.num-warps" = 4 : i32, ttg.target = "cuda:90"} {'
  ];

  it('splits dialect-qualified ops into dialect and op', () => {
    expect(classOf('mlir', ttir[1], 'arith')).toBe('dialect');
    expect(classOf('mlir', ttir[1], '.constant')).toBe('op');
    expect(classOf('mlir', ttir[3], 'tt')).toBe('dialect');
    expect(classOf('mlir', ttir[3], '.load')).toBe('op');
    expect(classOf('mlir', ttir[4], 'scf')).toBe('dialect');
    expect(classOf('mlir', ttir[0], '.func')).toBe('op');
  });

  it('knows values, symbols, types, shapes and attributes', () => {
    expect(classOf('mlir', ttir[1], '%c128_i32')).toBe('variable');
    expect(classOf('mlir', ttir[0], '@add_kernel')).toBe('symbol');
    expect(classOf('mlir', ttir[0], '!tt.ptr')).toBe('type');
    expect(classOf('mlir', ttir[0], 'f32')).toBe('type');
    expect(classOf('mlir', ttir[0], 'tt.divisibility')).toBe('attribute');
    expect(classOf('mlir', ttir[2], '128xi32'.slice(0, 4))).toBe('number');
    expect(classOf('mlir', ttir[2], 'tensor')).toBe('type');
    expect(classOf('mlir', ttir[4], '64x64x')).toBe('number');
    expect(classOf('mlir', ttir[4], 'iter_args')).toBe('keyword');
    expect(classOf('mlir', ttir[6], '#ttg.blocked')).toBe('attribute');
    expect(classOf('mlir', ttir[7], '"ttg.num-warps"')).toBe('attribute');
    expect(classOf('mlir', ttir[7], 'ttg.target')).toBe('attribute');
    expect(classOf('mlir', ttir[7], '"cuda:90"')).toBe('string');
  });

  it('splits shaped types into type, shape and element type', () => {
    expect(tokenizeLine(grammarFor('mlir')!, 'tensor<128x64xf32>')).toEqual([
      ['type', 'tensor'],
      ['punctuation', '<'],
      ['number', '128x64x'],
      ['type', 'f32'],
      ['punctuation', '>']
    ]);
  });

  it('dims locations as one token', () => {
    expect(classOf('mlir', ttir[0], 'loc("/tmp/k.py":10:0)')).toBe('location');
    expect(classOf('mlir', ttir[1], 'loc(#loc1)')).toBe('location');
    expect(classOf('mlir', ttir[5], '#loc1')).toBe('location');
    expect(
      classOf(
        'mlir',
        'tt.return loc(callsite(#loc3 at #loc4))',
        'loc(callsite(#loc3 at #loc4))'
      )
    ).toBe('location');
  });

  it('reads Mosaic TPU and Mosaic GPU', () => {
    const tpu =
      '    %2 = tpu.matmul %0, %1, %cst {dimension_numbers = #tpu.dot_dimension_numbers<[1], [0], [0], [1], [0, 0, 1, 1], [], []>} : vector<128x128xf32>, vector<128x128xf32>, vector<128x128xf32> -> vector<128x128xf32>';
    expect(classOf('mlir', tpu, 'tpu')).toBe('dialect');
    expect(classOf('mlir', tpu, '.matmul')).toBe('op');
    expect(classOf('mlir', tpu, 'dimension_numbers')).toBe('attribute');
    expect(classOf('mlir', tpu, '->')).toBe('operator');
    const memref =
      '  func.func @kernel(%arg0: i32, %arg2: memref<128x128xf32, #tpu.memory_space<vmem>>) attributes {dimension_semantics = [#tpu.dimension_semantics<parallel>]} {';
    expect(classOf('mlir', memref, 'memref')).toBe('type');
    expect(classOf('mlir', memref, '#tpu.memory_space')).toBe('attribute');
    const gpu =
      '    %5 = mosaic_gpu.slice_smem %c0 : memref<128xf32, #gpu.address_space<workgroup>>';
    expect(classOf('mlir', gpu, 'mosaic_gpu')).toBe('dialect');
    expect(classOf('mlir', gpu, '.slice_smem')).toBe('op');
    const generic =
      '    "tpu.sem_signal"(%arg5, %c1_i32) : (memref<!tpu.semaphore, #tpu.memory_space<semaphore_mem>>, i32) -> ()';
    expect(classOf('mlir', generic, '"tpu.sem_signal"')).toBe('op');
    expect(classOf('mlir', generic, '!tpu.semaphore')).toBe('type');
  });

  it('covers the dialects pallaslab lowers to', () => {
    for (const dialect of ['tt', 'ttg', 'arith', 'scf', 'tpu', 'mosaic_gpu']) {
      expect(MLIR_DIALECTS).toContain(dialect);
      expect(classOf('mlir', `%0 = ${dialect}.some_op %1`, dialect)).toBe(
        'dialect'
      );
    }
  });

  it('finds comments', () => {
    expect(classOf('mlir', '// -----// IR Dump //----- //', '// -----')).toBe(
      'comment'
    );
  });
});

describe('LLVM IR', () => {
  const define =
    'define void @add_kernel(ptr addrspace(1) %0, ptr addrspace(1) %1) local_unnamed_addr !dbg !5 {';
  const call =
    '  %5 = tail call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x(), !dbg !8';
  it('knows its words', () => {
    expect(classOf('llvm', define, 'define')).toBe('keyword');
    expect(classOf('llvm', define, 'void')).toBe('type');
    expect(classOf('llvm', define, '@add_kernel')).toBe('symbol');
    expect(classOf('llvm', define, '%0')).toBe('variable');
    expect(classOf('llvm', define, '!dbg !5')).toBe('location');
    expect(classOf('llvm', call, 'call')).toBe('op');
    expect(classOf('llvm', call, '@llvm.nvvm.read.ptx.sreg.ctaid.x')).toBe(
      'symbol'
    );
    expect(
      classOf(
        'llvm',
        '7:                                                ; preds = %3',
        '7:'
      )
    ).toBe('label');
    expect(
      classOf('llvm', '  %9 = fadd float %7, %8 ; the add', '; the add')
    ).toBe('comment');
    expect(classOf('llvm', '  %9 = fadd float %7, %8', 'fadd')).toBe('op');
  });
});

describe('PTX', () => {
  it('tells opcodes, modifiers, types and registers apart', () => {
    const load = '\tld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ];';
    expect(classOf('ptx', load, 'ld')).toBe('op');
    expect(classOf('ptx', load, '.global')).toBe('modifier');
    expect(classOf('ptx', load, '.b32')).toBe('type');
    expect(classOf('ptx', load, '%r1')).toBe('variable');
    const mov = '\tmov.u32 \t%r1, %ctaid.x;';
    expect(classOf('ptx', mov, 'mov')).toBe('op');
    expect(classOf('ptx', mov, '.u32')).toBe('type');
    expect(classOf('ptx', mov, '%ctaid.x')).toBe('special');
  });

  it('knows directives, predicates, labels and locations', () => {
    expect(classOf('ptx', '.visible .entry add_kernel(', '.visible')).toBe(
      'directive'
    );
    expect(classOf('ptx', '.visible .entry add_kernel(', '.entry')).toBe(
      'directive'
    );
    expect(classOf('ptx', '\t.reg .b32 \t%r<5>;', '.reg')).toBe('directive');
    expect(classOf('ptx', '\t.reg .b32 \t%r<5>;', '.b32')).toBe('type');
    const branch = '\t@%p1 bra \t$L__BB0_2;';
    expect(classOf('ptx', branch, '@%p1')).toBe('meta');
    expect(classOf('ptx', branch, 'bra')).toBe('op');
    expect(classOf('ptx', branch, '$L__BB0_2')).toBe('label');
    expect(classOf('ptx', '$L__BB0_2:', '$L__BB0_2:')).toBe('label');
    expect(classOf('ptx', '\t.loc\t1 12 34', '.loc\t1 12 34')).toBe('location');
    expect(
      classOf(
        'ptx',
        '\tmma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1}, {%r1}, {%r2}, {%f1};',
        'mma'
      )
    ).toBe('op');
    expect(
      classOf(
        'ptx',
        '\twgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%f1};',
        'wgmma'
      )
    ).toBe('op');
  });
});

describe('SASS', () => {
  const ldc =
    '        /*0000*/                   LDC R1, c[0x0][0x28] ;                         /* 0x00000a00ff017b82 */';
  it('reads nvdisasm lines', () => {
    expect(classOf('sass', ldc, '/*0000*/')).toBe('meta');
    expect(classOf('sass', ldc, 'LDC')).toBe('op');
    expect(classOf('sass', ldc, 'R1')).toBe('variable');
    expect(classOf('sass', ldc, 'c[0x0][0x28]')).toBe('special');
    expect(classOf('sass', ldc, '/* 0x00000a00ff017b82 */')).toBe('comment');
    const setp =
      '        /*0080*/                   ISETP.GE.AND P0, PT, R0, UR4, PT ;';
    expect(classOf('sass', setp, 'ISETP')).toBe('op');
    expect(classOf('sass', setp, '.GE.AND')).toBe('modifier');
    expect(classOf('sass', setp, 'UR4')).toBe('variable');
    const exit = '        /*0070*/               @P0 EXIT ;';
    expect(classOf('sass', exit, '@P0')).toBe('meta');
    expect(classOf('sass', exit, 'EXIT')).toBe('op');
    expect(
      classOf(
        'sass',
        '        /*00e0*/                   BRA `(.L_x_1) ;',
        '`(.L_x_1)'
      )
    ).toBe('label');
    expect(classOf('sass', '.L_x_1:', '.L_x_1:')).toBe('label');
    expect(classOf('sass', '\t\tFunction : add_kernel', 'Function')).toBe(
      'keyword'
    );
    expect(
      classOf('sass', '\t//## File "/tmp/k.py", line 12', '//## File')
    ).toBe('location');
    expect(
      classOf('sass', '   HMMA.16816.F32 R4, R8.reuse, R12, RZ ;', '.reuse')
    ).toBe('modifier');
  });
});

describe('jaxpr', () => {
  it('reads jaxprs as the inspector does', () => {
    const line = '    c:f32[128] = add a b';
    expect(classOf('jaxpr', line, 'f32[128]')).toBe('type');
    expect(classOf('jaxpr', line, 'add')).toBe('op');
    expect(classOf('jaxpr', '{ lambda ; a:f32[8]. let', 'lambda')).toBe(
      'keyword'
    );
    expect(classOf('jaxpr', '    d:f32[128] <- b[:]', 'b[:]'.slice(0, 1))).toBe(
      'op'
    );
    expect(classOf('jaxpr', '      name=add_kernel', 'name')).toBe('attribute');
  });
});

describe('grammars', () => {
  it('are all known by name and alias', () => {
    for (const name of Object.keys(GRAMMAR_SPECS)) {
      expect(grammarFor(name)?.name).toBe(name);
    }
    expect(grammarFor('ttgir')?.name).toBe('mlir');
    expect(grammarFor('llir')?.name).toBe('llvm');
    expect(grammarFor('cobol')).toBeNull();
  });

  it('never lose text, even on hostile input', () => {
    const hostile = [
      '<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>',
      '%%%%%% @@@@ #### !!!! ^^^^ "unterminated',
      'loc(loc(loc(',
      '\u0000\u00ff\u2028 /* x',
      'x'.repeat(5000)
    ];
    for (const name of Object.keys(GRAMMAR_SPECS)) {
      const grammar = grammarFor(name)!;
      for (const line of hostile) {
        expect(
          tokenizeLine(grammar, line)
            .map(([, t]) => t)
            .join('')
        ).toBe(line);
      }
    }
  });
});
