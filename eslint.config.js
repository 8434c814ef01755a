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
    // The stores use the backend and raise domain errors: they never import the member or gRPC,
    // know nothing of consensus, and meet each other only through structural interfaces
    // (lease/types.ts, mvcc/lease_hooks.ts).
    files: ["src/mvcc/**/*.ts"],
    rules: {
      "no-restricted-imports": ["error", { patterns: ["../server/**", "../grpc/**", "../raft/**", "../wal/**", "../lease/**"] }],
    },
  },
  {
    files: ["src/lease/**/*.ts"],
    rules: {
      "no-restricted-imports": ["error", { patterns: ["../server/**", "../grpc/**", "../raft/**", "../wal/**", "../mvcc/**"] }],
    },
  },
  {
    // Protobuf is a leaf: generated types and codecs import nothing of ours.
    files: ["src/pb/**/*.ts"],
    rules: {
      "no-restricted-imports": ["error", { patterns: ["../**"] }],
    },
  },
  {
    // The gRPC layer serves any proto: it uses pb and its own HTTP/2 front door, never the member or a store.
    files: ["src/grpc/*.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        { patterns: ["../server/**", "../mvcc/**", "../lease/**", "../backend/**", "../raft/**", "../wal/**", "../bbolt/**", "../etcd_format/**"] },
      ],
    },
  },
  {
    // The HTTP/2 + HPACK front door is the bottom of the gRPC layer: nothing outside itself.
    files: ["src/grpc/h2/**/*.ts"],
    rules: {
      "no-restricted-imports": ["error", { patterns: ["../**"] }],
    },
  },
  {
    // The WAL stores raft's records: raft's types are all it may know of the rest.
    files: ["src/wal/**/*.ts"],
    rules: {
      "no-restricted-imports": ["error", { patterns: [{ regex: "^\\.\\./(?!raft/types\\.js$)", message: "src/wal imports only raft's types" }] }],
    },
  },
  {
    // bbolt is a file format: nothing of ours; etcd's formats over it never import the member or gRPC.
    files: ["src/bbolt/**/*.ts"],
    rules: {
      "no-restricted-imports": ["error", { patterns: ["../**"] }],
    },
  },
  {
    files: ["src/etcd_format/**/*.ts"],
    rules: {
      "no-restricted-imports": ["error", { patterns: ["../server/**", "../grpc/**", "../raft/**", "../wal/**", "../lease/**"] }],
    },
  },
);
