// Modules a first `mcpTools` does not need are required when first used, not at import (issue 30).

/** A getter of `load()`'s value: `load` runs on the first call, and its value is kept for every later one. */
export function lazily<T>(load: () => T): () => T {
  let loaded: T | undefined;
  return () => (loaded ??= load());
}
