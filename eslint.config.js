// @ts-check
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/**", "node_modules/**", "bench/results/**", "coverage/**", "**/*.etcd/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: "readonly", console: "readonly", Buffer: "readonly" } },
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/no-explicit-any": "error",
      "no-constant-condition": ["error", { checkLoops: false }],
    },
  },
  {
    // The raft core is pure: no I/O, timers or clock.
    files: ["src/raft/**/*.ts"],
    rules: {
      "no-restricted-imports": ["error", { patterns: ["node:*", "fs", "net", "http*", "os", "child_process", "../*/**"] }],
      "no-restricted-globals": ["error", "setTimeout", "setInterval", "setImmediate", "Date", "performance", "process"],
    },
  },
  {
    // The backend is the bottom of the house: the stores use it, it imports none of them (nor the server).
    files: ["src/backend/**/*.ts"],
    rules: {
      "no-restricted-imports": ["error", { patterns: ["../*/**"] }],
    },
  },
  {
    // The stores use the backend and raise domain errors: they never import the member or gRPC.
    files: ["src/mvcc/**/*.ts", "src/lease/**/*.ts"],
    rules: {
      "no-restricted-imports": ["error", { patterns: ["../server/**", "../grpc/**"] }],
    },
  },
);
