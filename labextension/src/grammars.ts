/**
 * Grammars of the texts pallaslab shows: MLIR (Triton's tt/ttg/ttng, arith,
 * scf, Mosaic's tpu and mosaic_gpu, and the upstream dialects they use), LLVM
 * IR, PTX, SASS and jaxpr. Pure data plus the engine in `grammar.ts`.
 */

import { compileGrammar, IGrammar, IGrammarSpec, TokenClass } from './grammar';

const STRING = /"(?:[^"\\]|\\.)*"/;
const WORD = /[A-Za-z_][\w$]*/;

/** Dialects whose ops pallaslab's lowerings produce; others still highlight as ops. */
export const MLIR_DIALECTS = [
  'tt',
  'ttg',
  'ttng',
  'triton_gpu',
  'triton_nvidia_gpu',
  'arith',
  'scf',
  'cf',
  'tpu',
  'mosaic_gpu',
  'func',
  'memref',
  'vector',
  'math',
  'gpu',
  'nvvm',
  'nvgpu',
  'llvm',
  'builtin',
  'affine',
  'tensor',
  'stablehlo',
  'mhlo',
  'chlo',
  'sdy',
  'ub',
  'index',
  'proton'
];

const mlir: IGrammarSpec = {
  name: 'mlir',
  rules: [
    { token: 'comment', pattern: /\/\/.*/ },
    // Locations are noise next to the code: one token, dimmed.
    {
      token: 'location',
      pattern:
        /\bloc\((?:[^()"]|"(?:[^"\\]|\\.)*"|\((?:[^()"]|"(?:[^"\\]|\\.)*"|\((?:[^()"]|"(?:[^"\\]|\\.)*")*\))*\))*\)/
    },
    { token: 'location', pattern: /#loc\d*\b/ },
    // Generic op form: "tpu.sem_signal"(%0) : ...
    { token: 'op', pattern: /"[a-z_][\w$]*\.[\w$.]+"(?=\s*\()/ },
    // Keys of attribute dictionaries: {tt.divisibility = 16 : i32}.
    {
      token: 'attribute',
      pattern: /(?:"[^"\n]*"|[A-Za-z_][\w$.-]*)(?=\s*=(?!=))/
    },
    { token: 'string', pattern: STRING },
    { token: 'variable', pattern: /%[\w$.-]+(?:#\d+)?/ },
    { token: 'label', pattern: /\^[\w$.-]+/ },
    { token: 'symbol', pattern: /@(?:[\w$.-]+|"(?:[^"\\]|\\.)*")/ },
    { token: 'attribute', pattern: /#[\w$.-]+/ },
    { token: 'type', pattern: /![\w$.-]+/ },
    // Dialect-qualified op names: the dialect, then the op.
    { token: 'dialect', pattern: /[a-z_][\w$]*(?=\.[a-z_])/ },
    { token: 'op', pattern: /\.[a-z_][\w$.]*/, after: ['dialect'] },
    // Shapes: the 128x64x of tensor<128x64xf32>.
    { token: 'number', pattern: /(?:\d+|\?)(?:x(?:\d+|\?))*x(?=[A-Za-z!?])/ },
    {
      token: 'type',
      pattern:
        /(?:(?<=x)|\b)(?:tensor|memref|vector|complex|tuple|none|index|[su]?i\d+|bf16|tf32|f16|f32|f64|f80|f128|f8E\w+|f6E\w+|f4E\w+)\b/
    },
    {
      token: 'keyword',
      pattern:
        /\b(?:module|attributes|to|step|iter_args|dense|dense_resource|array|affine_map|affine_set|strided|offset|true|false|unit|private|public|nested|else|ins|outs|unknown)\b/
    },
    {
      token: 'number',
      pattern:
        /[-+]?(?:\b0x[0-9a-fA-F]+\b|\b\d+\.\d*(?:[eE][-+]?\d+)?|\b\d+(?:[eE][-+]?\d+)?\b)/
    },
    { token: 'operator', pattern: /->|=|::?/ },
    { token: 'punctuation', pattern: /[(){}[\]<>,]/ },
    { token: null, pattern: WORD }
  ]
};

const LLVM_OPS =
  'ret|br|switch|indirectbr|invoke|resume|unreachable|callbr|fneg|add|fadd|sub|fsub|mul|fmul|udiv|sdiv|fdiv|urem|srem|frem|shl|lshr|ashr|and|or|xor|extractelement|insertelement|shufflevector|extractvalue|insertvalue|alloca|load|store|fence|cmpxchg|atomicrmw|getelementptr|trunc|zext|sext|fptrunc|fpext|fptoui|fptosi|uitofp|sitofp|ptrtoint|inttoptr|bitcast|addrspacecast|icmp|fcmp|phi|select|freeze|call|tail|musttail|notail|va_arg|landingpad|catchpad|cleanuppad';
const LLVM_KEYWORDS =
  'define|declare|global|constant|private|internal|external|linkonce|linkonce_odr|weak|weak_odr|common|appending|extern_weak|available_externally|dso_local|dso_preemptable|unnamed_addr|local_unnamed_addr|addrspace|align|to|label|nuw|nsw|exact|inbounds|fast|nnan|ninf|nsz|arcp|contract|afn|reassoc|volatile|atomic|unordered|monotonic|acquire|release|acq_rel|seq_cst|syncscope|eq|ne|ugt|uge|ult|ule|sgt|sge|slt|sle|oeq|ogt|oge|olt|ole|one|ord|ueq|une|uno|true|false|null|undef|poison|zeroinitializer|attributes|source_filename|target|datalayout|triple|section|comdat|metadata|distinct|noundef|nonnull|readonly|writeonly|nocapture|noalias|immarg|x';

const llvm: IGrammarSpec = {
  name: 'llvm',
  rules: [
    { token: 'comment', pattern: /;.*/ },
    { token: 'string', pattern: /c?"(?:[^"\\]|\\.)*"/ },
    {
      token: 'label',
      pattern: /[\w.$-]+:(?!:)/,
      atStart: true,
      keepsStart: true
    },
    { token: 'variable', pattern: /%[-\w$.]+/ },
    { token: 'symbol', pattern: /@(?:[-\w$.]+|"(?:[^"\\]|\\.)*")/ },
    { token: 'location', pattern: /!dbg\s+!\d+/ },
    { token: 'meta', pattern: /!(?:[\w.]+|\d+)|#\d+/ },
    {
      token: 'type',
      pattern:
        /\b(?:void|half|bfloat|float|double|fp128|x86_fp80|ppc_fp128|ptr|token|opaque|i\d+)\b/
    },
    { token: 'op', pattern: new RegExp(`\\b(?:${LLVM_OPS})\\b`) },
    { token: 'keyword', pattern: new RegExp(`\\b(?:${LLVM_KEYWORDS})\\b`) },
    {
      token: 'number',
      pattern: /[-+]?(?:\b0x[0-9a-fA-F]+\b|\b\d+\.\d*(?:[eE][-+]?\d+)?|\b\d+\b)/
    },
    { token: 'operator', pattern: /=/ },
    { token: 'punctuation', pattern: /[(){}[\]<>,*]/ },
    { token: null, pattern: WORD }
  ]
};

const PTX_DIRECTIVES =
  'version|target|address_size|visible|extern|weak|entry|func|reg|param|local|shared|global|const|tex|align|loc|file|section|pragma|maxntid|reqntid|minnctapersm|maxnreg|explicitcluster|reqnctapercluster|maxclusterrank|noreturn|callprototype|calltargets|branchtargets|alias|common';
const PTX_TYPES =
  '[suf](?:8|16|32|64)|b(?:8|16|32|64|128)|f16x2|bf16x2|bf16|tf32|e4m3x\\d|e5m2x\\d|e4m3|e5m2|pred';
const PTX_SPECIAL_REGISTERS =
  'tid|ntid|ctaid|nctaid|laneid|warpid|nwarpid|smid|nsmid|gridid|clock|clock64|lanemask_\\w+|pm\\d|envreg\\d+|globaltimer|dynamic_smem_size|total_smem_size|cluster_\\w+|is_explicit_cluster';

const ptx: IGrammarSpec = {
  name: 'ptx',
  blockComment: ['/*', '*/'],
  statementEnd: ';{}',
  rules: [
    { token: 'comment', pattern: /\/\/.*/ },
    { token: 'location', pattern: /\.loc\b.*/ },
    { token: 'label', pattern: /[$%\w.]+:/, atStart: true, keepsStart: true },
    { token: 'meta', pattern: /@!?%?[\w.$]+/, atStart: true, keepsStart: true },
    { token: 'op', pattern: /[a-z][a-z0-9_]*/, atStart: true },
    // An opcode's suffixes: ld.global.v4.b32 (.global here is no directive).
    {
      token: 'type',
      pattern: new RegExp(`\\.(?:${PTX_TYPES})\\b`),
      after: ['op', 'modifier', 'type']
    },
    {
      token: 'modifier',
      pattern: /\.[A-Za-z_][\w]*/,
      after: ['op', 'modifier', 'type']
    },
    { token: 'directive', pattern: new RegExp(`\\.(?:${PTX_DIRECTIVES})\\b`) },
    { token: 'type', pattern: new RegExp(`\\.(?:${PTX_TYPES})\\b`) },
    { token: 'modifier', pattern: /\.[A-Za-z_][\w]*/ },
    {
      token: 'special',
      pattern: new RegExp(`%(?:${PTX_SPECIAL_REGISTERS})(?:\\.[xyz])?\\b`)
    },
    { token: 'variable', pattern: /%[\w$]+/ },
    { token: 'label', pattern: /\$[\w$]+/ },
    {
      token: 'number',
      pattern:
        /\b0[fF][0-9a-fA-F]{8}\b|\b0[dD][0-9a-fA-F]{16}\b|\b0[xX][0-9a-fA-F]+U?\b|-?\b\d+(?:\.\d+)?U?\b/
    },
    { token: 'string', pattern: STRING },
    { token: 'punctuation', pattern: /[{}()[\];,<>]/ },
    { token: null, pattern: WORD }
  ]
};

const sass: IGrammarSpec = {
  name: 'sass',
  statementEnd: ';',
  rules: [
    { token: 'location', pattern: /\/\/##.*/ },
    { token: 'comment', pattern: /\/\/.*/ },
    // Instruction addresses, /*0040*/, start a statement.
    { token: 'meta', pattern: /\/\*[0-9a-fA-F]{4,}\*\//, keepsStart: true },
    { token: 'comment', pattern: /\/\*.*?\*\// },
    { token: 'keyword', pattern: /\b(?:Function|code for)\b/ },
    { token: 'label', pattern: /\.?[\w$]+:/, atStart: true, keepsStart: true },
    { token: 'directive', pattern: /\.[a-z_][\w.]*/, atStart: true },
    {
      token: 'meta',
      pattern: /@!?U?P(?:T|\d)\b/,
      atStart: true,
      keepsStart: true
    },
    { token: 'op', pattern: /[A-Z][A-Z0-9_]*/, atStart: true },
    {
      token: 'modifier',
      pattern: /\.[A-Za-z0-9_]+/,
      after: ['op', 'modifier']
    },
    { token: 'label', pattern: /`\([^)]*\)|\.L_\w+/ },
    {
      token: 'variable',
      pattern:
        /\b(?:R\d+|RZ|UR\d+|URZ|P\d|PT|UP\d|UPT|B\d+|SR_[A-Z0-9_]+(?:\.[A-Z0-9_]+)*)\b/
    },
    {
      token: 'modifier',
      pattern: /\.[A-Za-z0-9_]+/,
      after: ['variable', 'modifier']
    },
    {
      token: 'special',
      pattern: /\b(?:c|cx)\[0x[0-9a-fA-F]+\]\[0x[0-9a-fA-F]+\]|\bdesc\b/
    },
    {
      token: 'number',
      pattern:
        /[-+]?(?:\b0x[0-9a-fA-F]+\b|\b\d+\.\d*(?:e[-+]?\d+)?|\b\d+\b|\bINF\b|\bQNAN\b)/
    },
    { token: 'string', pattern: STRING },
    { token: 'punctuation', pattern: /[;,[\](){}|!~-]/ },
    { token: null, pattern: WORD }
  ]
};

const jaxpr: IGrammarSpec = {
  name: 'jaxpr',
  rules: [
    { token: 'comment', pattern: /#.*/ },
    { token: 'keyword', pattern: /\b(?:lambda|let|in)\b/ },
    {
      token: 'type',
      pattern:
        /\b(?:bf16|f16|f32|f64|f8\w*|i1|i4|i8|i16|i32|i64|u1|u4|u8|u16|u32|u64|bool|c64|c128|float\d+|int\d+|uint\d+|bfloat16)\[[^\]]*\]/
    },
    { token: 'type', pattern: /\bRef(?:<\w*>|\{[^}]*\})/ },
    { token: 'string', pattern: /'[^']*'|"[^"]*"/ },
    { token: 'op', pattern: /(?<=(?:=|<-) )[A-Za-z_][\w.]*/ },
    { token: 'attribute', pattern: /\b[a-z_]\w*(?==)/ },
    { token: 'number', pattern: /-?\b\d+(?:\.\d*)?(?:e[-+]?\d+)?\b/ },
    { token: 'operator', pattern: /<-|=/ },
    { token: 'punctuation', pattern: /[{}()[\];,.:]/ },
    { token: null, pattern: WORD }
  ]
};

/** The grammar specs by language name. */
export const GRAMMAR_SPECS: { [name: string]: IGrammarSpec } = {
  mlir,
  llvm,
  ptx,
  sass,
  jaxpr
};

/** Other names the same texts go by (pallaslab's target stages, file extensions). */
export const LANGUAGE_ALIASES: { [alias: string]: string } = {
  ttir: 'mlir',
  ttgir: 'mlir',
  stablehlo: 'mlir',
  'mosaic-gpu': 'mlir',
  'mosaic-tpu': 'mlir',
  llir: 'llvm',
  ll: 'llvm'
};

const compiled = new Map<string, IGrammar>();

/** The compiled grammar of a language or alias; null for one we do not know. */
export function grammarFor(language: string): IGrammar | null {
  const name = LANGUAGE_ALIASES[language] ?? language;
  const spec = GRAMMAR_SPECS[name];
  if (!spec) {
    return null;
  }
  let grammar = compiled.get(name);
  if (!grammar) {
    grammar = compileGrammar(spec);
    compiled.set(name, grammar);
  }
  return grammar;
}

/** Token classes, for tests and the highlighting tables. */
export const TOKEN_CLASSES: TokenClass[] = [
  'comment',
  'location',
  'string',
  'number',
  'keyword',
  'op',
  'dialect',
  'directive',
  'modifier',
  'type',
  'variable',
  'special',
  'label',
  'symbol',
  'attribute',
  'meta',
  'operator',
  'punctuation'
];
