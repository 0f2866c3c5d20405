// Bundles ai_sdk_page.jsx (React, @ai-sdk/react, ai) into one ES module, written to stdout.
import { build } from "esbuild";

const built = await build({
  entryPoints: [new URL("ai_sdk_page.jsx", import.meta.url).pathname],
  bundle: true,
  format: "esm",
  jsx: "automatic",
  minify: true,
  write: false,
  define: { "process.env.NODE_ENV": '"production"' },
  logLevel: "error",
});
process.stdout.write(built.outputFiles[0].text);
