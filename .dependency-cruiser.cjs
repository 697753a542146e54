/**
 * The layers of src/, top to bottom: a module may import its own layer and the layers below it,
 * never one above (`npm run lint`). Entry points sit on top; the bottom layer holds what every
 * layer shares: request/ (ids, context keys), wire/ (Node HTTP types, wire formats, errors written
 * in them, connect's private modules), workers/ (starting workers) and the files at src/'s root.
 */
const LAYERS = [
  ["entry points", "^src/main\\.ts$|^src/(cli|launch)/"],
  ["transport", "^src/server/"],
  ["protocol surfaces", "^src/(rest|http|ops)/"],
  ["service", "^src/service/"],
  ["stores and engine", "^src/(auth|inference|landmarks|image)/"],
  ["shared", "^src/(request|wire|workers)/|^src/(errors|engine-errors|limits|config|log|package-root)\\.ts$"],
];

module.exports = {
  forbidden: [
    ...LAYERS.slice(1).map(([name, path], i) => ({
      name: `no-upward-import-from-${name.replace(/ /g, "-")}`,
      comment: `${name} may not import ${LAYERS.slice(0, i + 1).map(([n]) => n).join(", ")}`,
      severity: "error",
      from: { path },
      to: { path: LAYERS.slice(0, i + 1).map(([, p]) => `(${p})`).join("|") },
    })),
    {
      name: "no-test-code-in-src",
      comment: "production code never imports test helpers or the bench",
      severity: "error",
      from: { path: "^src/" },
      to: { path: "^(test|bench)/" },
    },
    {
      name: "no-build-tools-in-src",
      comment: "the server never converts models: build tools live in tools/ and run at install",
      severity: "error",
      from: { path: "^src/" },
      to: { path: "^tools/" },
    },
    { name: "no-circular", severity: "error", from: { path: "^src/" }, to: { circular: true } },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "^(gen|dist|node_modules)/" },
    tsConfig: { fileName: "tsconfig.json" },
    tsPreCompilationDeps: true,
  },
};
