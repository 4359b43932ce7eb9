// Type-checks kvwatch's generated Grafana dashboards against Grafana's own
// schema, @grafana/schema (Apache-2.0), with the TypeScript compiler. Each
// dashboard JSON becomes a TypeScript module in which every panel is an
// object literal typed with its panel plugin's Options and FieldConfig and
// the dashboard is typed as the schema's Dashboard: TypeScript then checks
// every enum value and, for literals, every unknown field.
//
// Usage: node check.mjs [DIR]  (default: the golden dashboards, which
// internal/stack's TestGolden keeps identical to what `kvwatch stack
// generate` writes). Exit status 1 on any type error.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const here = path.dirname(fileURLToPath(import.meta.url));
const dir = path.resolve(process.argv[2] ?? path.join(here, '../../internal/stack/testdata/golden/grafana/dashboards'));
const gen = path.join(here, 'gen');
fs.rmSync(gen, { recursive: true, force: true });
fs.mkdirSync(gen);

// The panel plugins kvwatch uses, with their schema modules and the types
// that exist there (a plugin without a FieldConfig type has free-form
// custom field config).
const plugins = {
  timeseries: { mod: 'timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen', fieldConfig: true },
  stat: { mod: 'stat/panelcfg/x/StatPanelCfg_types.gen', fieldConfig: false },
  // Grafana 13's gauge added required options (barShape, barWidthFactor,
  // effects, segmentCount, segmentSpacing, shape) that the foundation SDK
  // kvwatch builds with cannot express yet, and whose strict decode would
  // refuse them; Grafana fills them from the plugin's defaultOptions when it
  // loads a panel without them. They alone may be absent, never wrong.
  gauge: {
    mod: 'gauge/panelcfg/x/GaugePanelCfg_types.gen', fieldConfig: false,
    optional: ['barShape', 'barWidthFactor', 'effects', 'segmentCount', 'segmentSpacing', 'shape'],
  },
  bargauge: { mod: 'bargauge/panelcfg/x/BarGaugePanelCfg_types.gen', fieldConfig: false },
  table: { mod: 'table/panelcfg/x/TablePanelCfg_types.gen', fieldConfig: true },
};

const files = fs.readdirSync(dir).filter((f) => f.endsWith('.json')).sort();
if (files.length === 0) {
  console.error(`no dashboards (*.json) in ${dir}`);
  process.exit(1);
}
const roots = [];
for (const f of files) {
  const d = JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8'));
  const used = new Set();
  const panels = (d.panels ?? []).map((p, i) => {
    const pl = plugins[p.type];
    if (!pl) {
      console.error(`${f}: panel ${i} (${p.title}) has type ${p.type}, which check.mjs does not know: add it to plugins`);
      process.exit(1);
    }
    used.add(p.type);
    const fc = pl.fieldConfig ? `${p.type}_FieldConfig` : 'Record<string, unknown>';
    const opts = pl.optional ? `Loose<${p.type}_Options, ${pl.optional.map((k) => `'${k}'`).join(' | ')}>` : `${p.type}_Options`;
    return `// ${f} panel ${i}: ${p.title}\nexport const panel${i}: Typed<${opts}, ${fc}> = ${JSON.stringify(p, null, 2)};\n`;
  });
  const rest = { ...d };
  delete rest.panels;
  let src = `import type { Dashboard, Panel } from '@grafana/schema';\n`;
  for (const t of [...used].sort()) {
    const pl = plugins[t];
    const names = [`Options as ${t}_Options`].concat(pl.fieldConfig ? [`FieldConfig as ${t}_FieldConfig`] : []);
    src += `import type { ${names.join(', ')} } from '@grafana/schema/dist/esm/raw/composable/${pl.mod}';\n`;
  }
  src += `
// The schema's enums as the string values the JSON holds (a TypeScript
// string enum accepts no literal): every other type is kept, so excess
// fields and wrong values are still errors.
type Lit<T> = T extends string ? \`\${T}\` : T extends readonly (infer U)[] ? Lit<U>[] : T extends object ? { [K in keyof T]: Lit<T[K]> } : T;
// A panel whose options are those of its plugin (the schema's Panel leaves
// them untyped).
type Typed<O, F> = Lit<Omit<Panel<O, F>, 'options'> & { options: O }>;
// O with the keys K optional (see plugins.gauge).
type Loose<O, K extends keyof O> = Omit<O, K> & Partial<Pick<O, K>>;

`;
  src += panels.join('\n');
  // The panels are checked above, each with its plugin's types; the rest
  // of the dashboard is checked as the schema's Dashboard.
  src += `\nexport const dashboard: Lit<Omit<Dashboard, 'panels'>> = ${JSON.stringify(rest, null, 2)};\n`;
  const out = path.join(gen, f.replace(/\.json$/, '.ts'));
  fs.writeFileSync(out, src);
  roots.push(out);
}

const program = ts.createProgram(roots, {
  strict: true,
  noEmit: true,
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.ESNext,
  moduleResolution: ts.ModuleResolutionKind.Bundler,
  skipLibCheck: true,
  typeRoots: [],
  types: [],
});
const diags = ts.getPreEmitDiagnostics(program);
const host = { getCanonicalFileName: (f) => f, getCurrentDirectory: () => here, getNewLine: () => '\n' };
if (diags.length > 0) {
  console.error(ts.formatDiagnostics(diags, host));
  console.error(`@grafana/schema: ${diags.length} type errors in ${files.length} dashboards (sources in ${gen})`);
  process.exit(1);
}
console.log(`@grafana/schema: ${files.length} dashboards type-check (${files.join(', ')})`);
