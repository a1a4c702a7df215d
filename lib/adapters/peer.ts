// The frameworks a subpath is for are optional peer dependencies: when one is not installed, loading it
// fails with an error that names the package to install, not with the runtime's bare "Cannot find module".

/** What each optional peer is, for the message. */
const PEERS: Record<string, string> = {
  ai: 'the Vercel AI SDK',
  '@openai/agents': 'the OpenAI Agents SDK',
  '@anthropic-ai/sdk': "Anthropic's SDK",
};

/** The error a failed load of the peer `name` (for `subpath`) should raise: the given one unless the peer itself is missing. */
export function peerLoadError(subpath: string, name: string, cause: unknown): unknown {
  const code = (cause as { code?: unknown } | null)?.code;
  const message = cause instanceof Error ? cause.message : '';
  // Node (both module systems) and Bun quote the specifier that was not found; a dependency of the peer
  // that is missing names itself, and that error passes unchanged.
  const missing = (code === 'MODULE_NOT_FOUND' || code === 'ERR_MODULE_NOT_FOUND') && message.includes(`'${name}'`);
  if (!missing) return cause;
  const range = peerRange(name);
  const error = new Error(
    `${subpath} needs the package "${name}" (${PEERS[name] ?? name}${range ? `, ${range}` : ''}), an optional peer dependency of mcpferry ` +
      `that is not installed here. Install it: npm install ${name}`,
    { cause },
  ) as Error & { code: string; packageName: string };
  error.code = 'MCPFERRY_PEER_MISSING';
  error.packageName = name;
  return error;
}

/** Loads a peer with `load` (a `require` of it, from the caller's module), turning "not installed" into peerLoadError's. */
export function requirePeer<T>(subpath: string, name: string, load: () => T): T {
  try {
    return load();
  } catch (cause) {
    throw peerLoadError(subpath, name, cause);
  }
}

function peerRange(name: string): string | undefined {
  try {
    const manifest = require('../../package.json') as { peerDependencies?: Record<string, string> };
    return manifest.peerDependencies?.[name];
  } catch {
    return undefined;
  }
}
