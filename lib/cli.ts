// The `mcpferry` command: the servers of an mcp.json / mcpferry.toml, their tools, a call, their status.
// Everything it shows comes from the public API (loadMcpConfig, mcpTools, diagnostics); it holds no
// protocol logic. Text for people on stdout, `--json` for scripts; progress and warnings on stderr.

import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, extname, join, relative, resolve } from 'node:path';
import { spawn } from 'node:child_process';
import { parseArgs } from 'node:util';
import {
  composeMcpSystemPrompt,
  createEncryptedFileTokenStore,
  createKeyringTokenStore,
  createSqliteMcpConnectionStore,
  logoutMcpServer,
  mcpTools,
  McpError,
  printAuthorizationUrl,
  rebuildMcpToolsFromStorage,
  type McpConfig,
} from './index';
import { binding } from './binding';
import { withSpan } from './telemetry';
import { loadConfigText, type Unresolved } from './config-file';
import { readConfigFile } from './config-read';
import type { ContentBlock, Diagnostic, McpAuthorizationPrompt, McpResourceContents, McpOptions, McpServer, McpServerStatus, McpToolset } from './types';

/** Exit codes, documented in the README and `mcpferry --help`. */
export const EXIT = {
  ok: 0,
  /** The tool ran and reported an error, or the call failed. */
  toolError: 1,
  /** Bad usage, an unknown server or tool, or a bad configuration file. */
  usage: 2,
  /** A server the command needs could not be connected (or logged in to). */
  connection: 3,
} as const;

/** The files looked for, in order, when `--config` is not given. */
export const CONFIG_FILES = ['mcp.json', '.mcp.json', 'mcpferry.toml'];
/** Where `mcpferry trust` records trusted files, under the home directory (MCPFERRY_TRUST_FILE overrides it). */
const DEFAULT_TRUST_FILE = ['.config', 'mcpferry', 'trusted.json'];
/** The longest command line shown when a configuration is refused or trusted, in characters. */
const MAX_SHOWN_COMMAND_CHARS = 300;
const COMMANDS = new Set(['tools', 'call', 'resources', 'prompts', 'status', 'inspect', 'login', 'logout', 'trust']);
/** How often the names of servers still connecting are printed to stderr. */
const PROGRESS_INTERVAL_MS = 2_000;

const USAGE = `usage: mcpferry [--config <file>] [--json] <command>

commands:
  tools [server]              the tools of every server (or one), with each server's state
  call <tool> [json-args]     call a tool by its projected name (server__tool); args default to {}
  resources [server]          the resources (uri, name, MIME type, size) and resource templates of every server (or one)
  resources read <server> <uri> [--out <file>]
                              a resource's text; for a blob its MIME type and size (--out <file> writes its bytes)
  prompts [server]            the prompts of every server (or one), with their arguments
  prompts get <server> <name> [key=value...]
                              a prompt's messages, with its arguments
  status [server]             each server's state, transport and configuration (no secret values)
  inspect <server>            server info, protocol version, capabilities, catalogue size, disclosure tier
  login <server> [--no-browser] [--device]   log in to an OAuth server; tokens go to the token store
  logout <server>             revoke and forget a server's tokens
  trust                       trust the configuration found here as it is now (see below)

options:
  --config <file>   the configuration (default: the first of ./mcp.json, ./.mcp.json, ./mcpferry.toml)
  --json            machine-readable output on stdout
  --out <file>      resources read: write the resource's bytes to <file> (a blob is never printed)
  --quiet           no progress on stderr
  --strict          refuse a configuration with a key no MCP client documents (default: a warning on stderr)
  --store <file>    remember catalogues in this SQLite file (or MCPFERRY_STORE): later runs show a server
                    that can't be reached as stale, with its last listed tools, and vet every listing
                    against the first one recorded (changed tools are quarantined)

exit codes: 0 ok, 1 tool error, 2 usage or configuration error, 3 a server could not be connected

tokens (OAuth): the OS keyring; or an encrypted file with MCPFERRY_TOKEN_FILE and MCPFERRY_TOKEN_KEY set

trust: a configuration found in the current directory (not named with --config) that starts a command or
reads environment variables is refused (exit 2) until trusted: \`mcpferry trust\` records its path and
SHA-256 in ~/.config/mcpferry/trusted.json (or MCPFERRY_TRUST_FILE); a change to the file needs trusting again.
`;

class UsageError extends Error {}
/** Exit 2 with the message alone, without the usage: a configuration the CLI will not use as it is, a tool it can't find. */
class RefusedError extends Error {}

/**
 * `stale`: the tools shown are a listing the server can't confirm now: it could not be reached and its
 * tools come from the store (`--store`), or re-listing a catalogue whose `ttlMs` lapsed failed
 * (`catalogue-stale`). `degraded`: not connected and no tools, with the reason.
 */
type State = 'disabled' | 'live' | 'stale' | 'degraded' | 'pending';

interface ServerReport {
  name: string;
  type: string;
  state: State;
  reason?: string;
  errorCode?: string;
  /** Not connected (degraded, or stale with tools from the store). */
  unreachable?: boolean;
  connected?: Extract<Diagnostic, { code: 'server-connected' }>;
}

interface Io {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  cwd: string;
  env: NodeJS.ProcessEnv;
}

/** Run the CLI with `argv` (without node and the script); resolves to the exit code. */
export async function main(argv: string[], given: Io = processIo()): Promise<number> {
  const io = terminalSafe(given);
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        config: { type: 'string', short: 'c' },
        json: { type: 'boolean' },
        quiet: { type: 'boolean', short: 'q' },
        store: { type: 'string' },
        strict: { type: 'boolean' },
        out: { type: 'string', short: 'o' },
        'no-browser': { type: 'boolean' },
        device: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (error) {
    return usage(io, (error as Error).message);
  }
  const { values, positionals } = parsed;
  if (values.help || positionals.length === 0) {
    (values.help ? io.stdout : io.stderr)(USAGE);
    return values.help ? EXIT.ok : EXIT.usage;
  }
  const [command, ...rest] = positionals;
  const json = values.json === true;
  try {
    if (!COMMANDS.has(command)) throw new UsageError(`unknown command ${JSON.stringify(command)}`);
    if (values.out !== undefined && !(command === 'resources' && rest[0] === 'read')) throw new UsageError('--out is for resources read');
    const found = await findConfig(values.config, io, values.strict === true);
    if (command === 'trust') return await trust(found, rest, io, json);
    if (found.discovered) await checkTrusted(found, io);
    // Only now is anything read for it (${…}, envFile, env_vars): from the bytes that were checked.
    const config = loadConfigText(found.text, found.path, { strict: values.strict === true, warnings: false }); // A bad file is reported from here.
    for (const warning of config.warnings) io.stderr(`mcpferry: warning: ${printable(warning)}\n`);
    const storePath = values.store ?? io.env.MCPFERRY_STORE;
    const cli = new Cli(config, io, json, values.quiet === true, storePath ? resolve(io.cwd, storePath) : undefined);
    switch (command) {
      case 'tools':
        return await cli.tools(optionalServer(rest, config));
      case 'status':
        return await cli.status(optionalServer(rest, config));
      case 'inspect':
        return await cli.inspect(requiredServer(rest, config, 'inspect'));
      case 'call':
        return await cli.call(rest);
      case 'resources':
        if (subcommand(rest, 'read', config)) {
          if (rest.length !== 3) throw new UsageError('resources read takes a server name and a resource URI');
          return await cli.readResource(checkServer(rest[1], config), rest[2], values.out === undefined ? undefined : resolve(io.cwd, values.out));
        }
        return await cli.resources(optionalServer(rest, config));
      case 'prompts':
        if (subcommand(rest, 'get', config)) {
          if (rest.length < 3) throw new UsageError('prompts get takes a server name, a prompt name and, optionally, key=value arguments');
          return await cli.getPrompt(checkServer(rest[1], config), rest[2], promptArguments(rest.slice(3)));
        }
        return await cli.prompts(optionalServer(rest, config));
      case 'login':
        return await cli.login(requiredServer(rest, config, 'login'), { browser: values['no-browser'] !== true, device: values.device === true });
      default:
        return await cli.logout(requiredServer(rest, config, 'logout'));
    }
  } catch (error) {
    if (error instanceof UsageError) return usage(io, error.message);
    if (error instanceof RefusedError || (error instanceof McpError && error.code === 'mcp_config_invalid')) {
      io.stderr(`mcpferry: ${printableLines(error.message)}\n`);
      return EXIT.usage;
    }
    io.stderr(`mcpferry: ${printableLines(error instanceof Error ? error.message : String(error))}\n`);
    return EXIT.toolError;
  }
}

/**
 * `io` with every write passed through `printableLines`: names, paths and messages from a file, a server
 * or the command line are made printable where they are put in a line (`printable`), and nothing that
 * steers a terminal gets past the writes either (`--json` output has its controls escaped already).
 */
function terminalSafe(io: Io): Io {
  return { ...io, stdout: (text) => io.stdout(printableLines(text)), stderr: (text) => io.stderr(printableLines(text)) };
}

function processIo(): Io {
  return {
    stdout: (text) => void process.stdout.write(text),
    stderr: (text) => void process.stderr.write(text),
    cwd: process.cwd(),
    env: process.env,
  };
}

function usage(io: Io, message: string): number {
  io.stderr(`mcpferry: ${printableLines(message)}\n\n${USAGE}`);
  return EXIT.usage;
}

/** A configuration file as found: its bytes, read once, and the entries as written in them. */
interface FoundConfig {
  /**
   * The entries as the file writes them, nothing read for them (no `${…}`, `envFile` or `env_vars`):
   * what deciding whether to trust the file is done from.
   */
  written: McpConfig & { unresolved?: Unresolved };
  path: string;
  /** Found in the current directory rather than named with --config. */
  discovered: boolean;
  /** The bytes read, which are the bytes hashed, checked and loaded. */
  text: string;
  sha256: string;
}

async function findConfig(given: string | undefined, io: Io, strict: boolean): Promise<FoundConfig> {
  const path = given !== undefined ? resolve(io.cwd, given) : CONFIG_FILES.map((name) => resolve(io.cwd, name)).find((p) => existsSync(p));
  if (path === undefined) throw new UsageError(`no configuration: pass --config <file> or create one of ${CONFIG_FILES.join(', ')} here`);
  // Read once (a regular file, bounded: a link to /dev/zero is refused): what is hashed is what is loaded.
  const bytes = await readConfigFile(path);
  const text = bytes.toString('utf8');
  const written = loadConfigText(text, path, { strict, warnings: false, resolve: false });
  return { written, path, discovered: given === undefined, text, sha256: createHash('sha256').update(bytes).digest('hex') };
}

/**
 * What using `found` would do that a file from an untrusted checkout must not do unasked: each command it
 * starts, with the variables (`env_vars`) and files (`envFile`) it gives it; each environment variable it
 * reads into its entries (JSON `${env:NAME}` / `${NAME}`) or sends as a header; any `${…}` (the home or
 * current directory too) it sends to an HTTP server. Names, paths and commands only, as written in the
 * file, so no variable's value is shown.
 */
function trustNeeds(found: FoundConfig): string[] {
  const json = extname(found.path).toLowerCase() !== '.toml';
  let raw: unknown;
  if (json) {
    try {
      raw = JSON.parse(found.text);
    } catch {
      return ['(its JSON could not be checked)'];
    }
  }
  const needs: string[] = [];
  for (const server of found.written.servers) {
    if (server.enabled === false) continue;
    const name = JSON.stringify(server.name);
    if (server.type === 'stdio') {
      // As written: the unresolved load leaves ${…} references in place.
      needs.push(`start ${name}: ${commandLine(server)}`);
      const reads = found.written.unresolved?.[server.name];
      if (reads?.envVars.length) needs.push(`pass the environment variables ${reads.envVars.join(', ')} to ${name} (env_vars)`);
      for (const file of reads?.envFile ?? []) needs.push(`read the envFile ${JSON.stringify(file)} into the environment of ${name}`);
    } else {
      const variables = Object.values(server.headersFromEnv ?? {}).concat(server.bearerTokenEnv ?? []);
      if (variables.length > 0) needs.push(`send the environment variables ${variables.join(', ')} as headers to ${name} (${urlWithoutQuery(server.url)})`);
      // Any ${…} a remote server would receive, the editors' variables too: ${userHome} is the user's name.
      const sent = new Set<string>();
      forEachString([server.url, server.headers], (text) => {
        for (const match of text.matchAll(/\$\{([^}]*)\}?/g)) sent.add(`\${${match[1]}}`);
      });
      if (sent.size > 0) needs.push(`send ${[...sent].join(', ')} in the url or headers of ${name} (${urlWithoutQuery(server.url)})`);
    }
  }
  // Every reference in the file, a disabled entry's too (it is read once the entry is enabled).
  const references = new Set<string>();
  if (json) forEachString(raw, (text) => {
    for (const match of text.matchAll(/\$\{([^}]*)\}?/g)) {
      // The editors' predefined variables (${workspaceFolder}, ${userHome}, …) are not the environment.
      if (!EDITOR_VARIABLES.has(match[1])) references.add(match[1].replace(/^env:/, '').replace(/:-.*$/s, ''));
    }
  });
  if (references.size > 0) needs.push(`read the environment variables ${[...references].join(', ')} into its entries`);
  return needs.map(printable);
}

/** The `${…}` names loadMcpConfig resolves without the environment. */
const EDITOR_VARIABLES: ReadonlySet<string> = new Set(['workspaceFolder', 'workspaceFolderBasename', 'userHome', 'cwd', 'pathSeparator', '/']);

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

function forEachString(value: unknown, visit: (text: string) => void): void {
  if (typeof value === 'string') visit(value);
  else if (Array.isArray(value)) value.forEach((item) => forEachString(item, visit));
  else if (isRecord(value)) Object.values(value).forEach((item) => forEachString(item, visit));
}

/** `command arg …` of an entry as written, quoting what has spaces, cut to MAX_SHOWN_COMMAND_CHARS. */
function commandLine(entry: unknown): string {
  if (!isRecord(entry) || typeof entry.command !== 'string') return '(a command)';
  const words = [entry.command, ...(Array.isArray(entry.args) ? entry.args.map(String) : [])].map((w) => (/^[^\s"'\\]+$/.test(w) ? w : JSON.stringify(w)));
  const line = words.join(' ');
  return line.length > MAX_SHOWN_COMMAND_CHARS ? `${line.slice(0, MAX_SHOWN_COMMAND_CHARS)}…` : line;
}

interface TrustRecord {
  path: string;
  sha256: string;
  trustedAt: string;
}

function trustFile(io: Io): string {
  const override = io.env.MCPFERRY_TRUST_FILE;
  return override ? resolve(io.cwd, override) : join(homedir(), ...DEFAULT_TRUST_FILE);
}

async function readTrust(file: string): Promise<TrustRecord[]> {
  if (!existsSync(file)) return [];
  const bytes = await readConfigFile(file);
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString('utf8'));
  } catch {
    parsed = undefined;
  }
  const records = isRecord(parsed) && Array.isArray(parsed.trusted) ? parsed.trusted : undefined;
  if (!records) throw new RefusedError(`${file} is not a trust file ({ "trusted": [...] }); fix or remove it`);
  return records.filter((r): r is TrustRecord => isRecord(r) && typeof r.path === 'string' && typeof r.sha256 === 'string');
}

/** Refuse a discovered configuration that would start or read something, unless trusted as it is now. */
async function checkTrusted(found: FoundConfig, io: Io): Promise<void> {
  const needs = trustNeeds(found);
  if (needs.length === 0) return;
  const file = trustFile(io);
  const records = await readTrust(file);
  if (records.some((r) => r.path === found.path && r.sha256 === found.sha256)) return;
  const changed = records.some((r) => r.path === found.path);
  const shown = relative(io.cwd, found.path) || found.path;
  throw new RefusedError(
    [
      `${found.path} was found in this directory and is not trusted${changed ? ' (it changed since it was trusted)' : ''}. Using it would:`,
      ...needs.map((need) => `  ${need}`),
      `If you trust it: pass it for this run with --config ${shown}, or run \`mcpferry trust\` to trust it as it is now (recorded in ${file}).`,
    ].join('\n'),
  );
}

/** `mcpferry trust`: record the configuration's path and SHA-256 in the trust file. */
async function trust(found: FoundConfig, rest: string[], io: Io, json: boolean): Promise<number> {
  if (rest.length > 0) throw new UsageError(`trust takes no argument (it trusts ${found.path}; pass --config <file> for another)`);
  const needs = trustNeeds(found);
  const file = trustFile(io);
  const records = (await readTrust(file)).filter((r) => r.path !== found.path);
  records.push({ path: found.path, sha256: found.sha256, trustedAt: new Date().toISOString() });
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  // Written whole, then renamed over the old file: a crash never leaves half a trust file.
  const partial = `${file}.${process.pid}.tmp`;
  writeFileSync(partial, `${JSON.stringify({ trusted: records }, null, 2)}\n`, { mode: 0o600 });
  renameSync(partial, file);
  const text = [`trusted ${found.path} (sha256 ${found.sha256}) in ${file}${needs.length ? '; it may:' : ''}`, ...needs.map((need) => `  ${need}`)].join('\n');
  io.stdout(json ? toJson({ trusted: found.path, sha256: found.sha256, trustFile: file, needs }) : `${printableLines(text)}\n`);
  return EXIT.ok;
}

function optionalServer(rest: string[], config: McpConfig): string | undefined {
  if (rest.length > 1) throw new UsageError(`unexpected argument ${JSON.stringify(rest[1])}`);
  if (rest.length === 1) checkServer(rest[0], config);
  return rest[0];
}

/** `resources read …` / `prompts get …`, unless the word alone names a server (`mcpferry prompts get` lists server "get"). */
function subcommand(rest: string[], word: string, config: McpConfig): boolean {
  return rest[0] === word && !(rest.length === 1 && config.servers.some((s) => s.name === word));
}

/** `key=value` words as a prompt's arguments (a value may hold `=`; a key may be given once). */
function promptArguments(words: string[]): Record<string, string> {
  const args: Record<string, string> = {};
  for (const word of words) {
    const at = word.indexOf('=');
    if (at <= 0) throw new UsageError(`a prompt argument is key=value, not ${JSON.stringify(word)}`);
    const key = word.slice(0, at);
    if (Object.hasOwn(args, key)) throw new UsageError(`the prompt argument ${JSON.stringify(key)} is given twice`);
    args[key] = word.slice(at + 1);
  }
  return args;
}

function requiredServer(rest: string[], config: McpConfig, command: string): string {
  if (rest.length !== 1) throw new UsageError(`${command} takes one server name`);
  return checkServer(rest[0], config);
}

function checkServer(name: string, config: McpConfig): string {
  if (!config.servers.some((s) => s.name === name)) {
    const known = config.servers.map((s) => printable(s.name)).join(', ') || '(none)';
    throw new UsageError(`no server ${quoted(name)} in ${printable(config.source ?? 'the configuration')} (servers: ${known})`);
  }
  return name;
}

/**
 * Characters that steer a terminal or reorder what it shows rather than being shown: C0 and C1 controls
 * (ESC starts OSC 52 clipboard writes and OSC 8 links), DEL, line separators and bidirectional overrides.
 */
const TERMINAL_CONTROLS = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/** Terminal-safe text on one line: no control characters from a server. */
function printable(text: unknown): string {
  return String(text).replace(TERMINAL_CONTROLS, ' ');
}

/** `text` in quotes, terminal-safe: a name the person typed or a file gave. */
function quoted(text: string): string {
  return printable(JSON.stringify(text));
}

/** Terminal-safe text that keeps its lines and tabs (a tool's result, a multi-line message). */
function printableLines(text: unknown): string {
  return String(text).replace(TERMINAL_CONTROLS, (c) => (c === '\n' || c === '\t' ? c : ' '));
}

/**
 * `--json` output: JSON.stringify escapes C0 controls in strings but not DEL, C1 controls or bidirectional
 * overrides; those are escaped too (only strings can hold them; the newlines left are the layout's).
 */
function toJson(value: unknown): string {
  const escape = (c: string) => (c === '\n' ? c : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return `${JSON.stringify(value, null, 2).replace(TERMINAL_CONTROLS, escape)}\n`;
}

/** An HTTP entry with no credential configured logs in with OAuth when the server asks (as other clients do). */
function withOAuth(server: McpServer): McpServer {
  if (server.type === 'stdio' || server.oauth !== undefined) return server;
  const headers = Object.keys(server.headers ?? {}).concat(Object.keys(server.headersFromEnv ?? {}));
  const hasCredential = server.bearerTokenEnv !== undefined || headers.some((h) => h.toLowerCase() === 'authorization');
  return hasCredential ? server : { ...server, oauth: true };
}

function oauthOf(server: McpServer) {
  return server.type === 'stdio' ? undefined : server.oauth;
}

/** A server as `resources` and `prompts` list it: its state, and the listing's error if it failed. */
interface Listed {
  name: string;
  state: State;
  reason?: string;
  error?: { code: string; message: string };
}

type Listing<T> = { report: ServerReport; listed: Listed & Partial<T> };

class Cli {
  constructor(
    private readonly config: McpConfig,
    private readonly io: Io,
    private readonly json: boolean,
    private readonly quiet: boolean,
    private readonly storePath?: string,
  ) {}

  private out(value: unknown, text: string): void {
    this.io.stdout(this.json ? toJson(value) : text);
  }

  private tokenStore() {
    const { MCPFERRY_TOKEN_FILE: file, MCPFERRY_TOKEN_KEY: key } = this.io.env;
    if (file) {
      if (!key) throw new UsageError('MCPFERRY_TOKEN_FILE needs MCPFERRY_TOKEN_KEY (the key the file is encrypted with)');
      return createEncryptedFileTokenStore(resolve(this.io.cwd, file), { key });
    }
    return createKeyringTokenStore({ service: 'mcpferry-cli' });
  }

  private selected(only?: string): McpServer[] {
    return this.config.servers.filter((s) => only === undefined || s.name === only);
  }

  /**
   * Connect `servers` (disabled ones stay disabled), printing which are still pending to stderr.
   * Returns the toolset and one report per server.
   */
  private async connect(servers: McpServer[], extra: McpOptions = {}): Promise<{ toolset: McpToolset; reports: Map<string, ServerReport> }> {
    const reports = new Map<string, ServerReport>();
    for (const server of servers) {
      reports.set(server.name, { name: server.name, type: server.type, state: server.enabled === false ? 'disabled' : 'pending' });
    }
    const started = Date.now();
    const pending = () => [...reports.values()].filter((r) => r.state === 'pending').map((r) => r.name);
    const progress = (text: string) => {
      if (!this.quiet) this.io.stderr(`mcpferry: ${text}\n`);
    };
    const waiting = pending();
    if (waiting.length > 0) progress(`connecting to ${waiting.map(printable).join(', ')}`);
    const ticker = setInterval(() => {
      const still = pending();
      if (still.length > 0) progress(`still connecting to ${still.map(printable).join(', ')} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
    }, PROGRESS_INTERVAL_MS);
    const onDiagnostic = (d: Diagnostic) => {
      const report = reports.get(d.server);
      if (d.code === 'server-connected' && report) {
        Object.assign(report, { state: 'live', connected: d });
        progress(`${printable(d.server)} connected (${d.elapsedMs} ms)`);
      } else if (d.code === 'server-degraded' && report) {
        // The engine's advice is for programs; a person at this CLI logs in with a command.
        const reason = d.errorCode === 'mcp_auth_error' && /needs a login/.test(d.message) ? `${d.message.replace(/\. Set options\.onAuthorizationUrl.*$/, '')}; run: mcpferry login ${printable(d.server)}` : d.message;
        Object.assign(report, { state: 'degraded', unreachable: true, reason, errorCode: d.errorCode });
        progress(`${printable(d.server)} failed: ${printable(reason)}`);
      } else if (d.code === 'catalogue-stale' && report && report.state === 'live') {
        Object.assign(report, { state: 'stale', reason: d.message, errorCode: d.errorCode });
        progress(`${printable(d.server)} is stale: ${printable(d.message)}`);
      } else if (d.code !== 'server-connecting' && d.code !== 'log') {
        this.io.stderr(`mcpferry: warning: ${printable(d.message)}\n`);
      }
    };
    const usesOAuth = servers.some((s) => s.type !== 'stdio' && s.enabled !== false && oauthOf(withOAuth(s)) !== undefined);
    try {
      const options: McpOptions = {
        progress: true,
        onDiagnostic,
        // Only `login` sends a person to a login page when stdin is not a terminal (mcpTools prints the
        // URL on a terminal by default); elsewhere a server that needs a login is degraded, saying so.
        ...(usesOAuth ? { tokenStore: this.tokenStore() } : {}),
        ...extra,
      };
      const entries = servers.map(withOAuth);
      const storage = this.storePath === undefined ? undefined : createSqliteMcpConnectionStore(this.storePath);
      if (storage === undefined) return { toolset: await mcpTools(entries, options), reports };
      // With a store: the map from the last listings first, then every server asked (and vetted).
      let toolset: McpToolset;
      if ((await storage.list()).length > 0) {
        const rebuilt = await rebuildMcpToolsFromStorage(entries, { ...options, storage });
        await rebuilt.reconciled;
        toolset = rebuilt;
      } else {
        toolset = await mcpTools(entries, { ...options, storage });
      }
      for (const report of reports.values()) {
        const known = Object.values(toolset.tools).some((t) => t.server === report.name);
        if (report.state === 'degraded' && known) {
          Object.assign(report, { state: 'stale', unreachable: true, reason: `${report.reason ?? 'unavailable'}; these tools are from its last listing` });
        }
      }
      return { toolset, reports };
    } finally {
      clearInterval(ticker);
    }
  }

  private static describe(report: ServerReport): string {
    switch (report.state) {
      case 'live':
        return 'live';
      case 'degraded':
        return `degraded: ${printable(report.reason ?? 'unavailable')}`;
      case 'stale':
        return `stale: ${printable(report.reason ?? 'its last listing is in use')}`;
      default:
        return report.state;
    }
  }

  /** `state: failed, 2 restarts, last error mcp_transport_error: …`: the engine's state of a server, on one line. */
  private static state(status: Omit<McpServerStatus, 'name'>): string {
    const restarts = status.restarts > 0 ? `, ${count(status.restarts, 'restart')}` : '';
    const lastError = status.state === 'failed' && status.lastError ? `, last error ${printable(status.lastError.code)}: ${printable(status.lastError.message)}` : '';
    return `state: ${printable(status.state)}${restarts}${lastError}`;
  }

  async tools(only?: string): Promise<number> {
    const { toolset, reports } = await this.connect(this.selected(only));
    try {
      const servers = [...reports.values()].map((report) => ({
        name: report.name,
        state: report.state,
        ...(report.reason ? { reason: report.reason } : {}),
        tools: Object.values(toolset.tools)
          .filter((t) => t.server === report.name)
          .map((t) => ({ name: t.name, remoteName: t.remoteName, description: t.description, inputSchema: t.inputSchema })),
      }));
      const lines = servers.flatMap((s) => [
        `${printable(s.name)}  ${Cli.describe(reports.get(s.name)!)}${s.state === 'live' || s.state === 'stale' ? `  (${count(s.tools.length, 'tool')})` : ''}`,
        ...s.tools.map((t) => `  ${printable(t.name)}  ${printable(t.description.split('\n')[0]).slice(0, 100)}`),
      ]);
      this.out({ servers }, `${lines.join('\n')}\n`);
      return [...reports.values()].some((r) => r.unreachable) ? EXIT.connection : EXIT.ok;
    } finally {
      await toolset.close();
    }
  }

  async status(only?: string): Promise<number> {
    const { toolset, reports } = await this.connect(this.selected(only));
    // The engine's own account of each server (its state, restarts, last error), read before closing.
    let states: McpServerStatus[];
    try {
      states = toolset.servers();
    } finally {
      await toolset.close();
    }
    const servers = this.selected(only).map((server) => {
      const report = reports.get(server.name)!;
      const found = states.find((s) => s.name === server.name);
      const status = found && (({ name: _, ...rest }) => rest)(found);
      // What is configured, never a value that may be a secret: names of env variables and headers only,
      // the arguments with the engine's redaction of their credentials, and a URL without its query.
      const target =
        server.type === 'stdio'
          ? { command: server.command, args: binding.redactStdioArguments(server.args ?? [], server.env ?? {}), env: Object.keys(server.env ?? {}) }
          : { url: urlWithoutQuery(server.url), headers: Object.keys(server.headers ?? {}).concat(Object.keys(server.headersFromEnv ?? {})) };
      return {
        name: server.name,
        type: server.type,
        state: report.state,
        ...(report.reason ? { reason: report.reason, errorCode: report.errorCode } : {}),
        ...(report.connected ? { elapsedMs: report.connected.elapsedMs, protocolVersion: report.connected.protocolVersion } : {}),
        ...(status ? { status } : {}),
        ...target,
      };
    });
    const lines = servers.map((s) => {
      const where =
        'url' in s
          ? `${s.url}${s.headers?.length ? ` (headers ${s.headers.join(' ')})` : ''}`
          : `${commandLine({ command: s.command, args: s.args })}${s.env.length ? ` (env ${s.env.join(' ')})` : ''}`;
      const timing = s.elapsedMs !== undefined ? `  ${s.elapsedMs} ms, ${s.protocolVersion}` : '';
      return `${printable(s.name)}  ${s.type}  ${Cli.describe(reports.get(s.name)!)}${timing}\n${s.status ? `  ${Cli.state(s.status)}\n` : ''}  ${printable(where)}`;
    });
    this.out({ source: this.config.source, servers }, `${lines.join('\n')}\n`);
    return [...reports.values()].some((r) => r.unreachable) ? EXIT.connection : EXIT.ok;
  }

  async inspect(name: string): Promise<number> {
    const { toolset, reports } = await this.connect(this.selected(name));
    try {
      const report = reports.get(name)!;
      const tools = Object.values(toolset.tools).filter((t) => t.server === name);
      const connected = report.connected;
      const info = {
        name,
        type: report.type,
        state: report.state,
        ...(report.reason ? { reason: report.reason, errorCode: report.errorCode } : {}),
        ...(connected
          ? {
              serverInfo: connected.serverInfo,
              protocolVersion: connected.protocolVersion,
              capabilities: connected.capabilities,
              catalogueSize: connected.toolCount,
              projectedTools: tools.length,
              disclosureTier: disclosureTier(composeMcpSystemPrompt(toolset), name),
              elapsedMs: connected.elapsedMs,
            }
          : {}),
      };
      const text = connected
        ? [
            `${printable(name)}  ${Cli.describe(report)}`,
            `  server        ${printable(connected.serverInfo.name)} ${printable(connected.serverInfo.version)}`,
            `  protocol      ${printable(connected.protocolVersion)}`,
            `  capabilities  ${connected.capabilities.map(printable).join(', ') || '(none)'}`,
            `  catalogue     ${connected.toolCount} tools published, ${tools.length} in the map`,
            `  disclosure    ${info.disclosureTier}`,
            `  connected in  ${connected.elapsedMs} ms`,
          ].join('\n')
        : `${printable(name)}  ${Cli.describe(report)}`;
      this.out(info, `${text}\n`);
      return report.unreachable ? EXIT.connection : EXIT.ok;
    } finally {
      await toolset.close();
    }
  }

  async call(rest: string[]): Promise<number> {
    if (rest.length < 1 || rest.length > 2) throw new UsageError('call takes a tool name and, optionally, JSON arguments');
    const [toolName, argsText = '{}'] = rest;
    let args: unknown;
    try {
      args = JSON.parse(argsText);
    } catch (error) {
      throw new UsageError(`the arguments are not JSON: ${(error as Error).message}`);
    }
    if (args === null || typeof args !== 'object' || Array.isArray(args)) throw new UsageError('the arguments must be a JSON object');
    // Only the server the name points at is started, when the name says which.
    const owner = this.config.servers.find((s) => toolName.startsWith(`${s.name}__`));
    const { toolset, reports } = await this.connect(owner ? [owner] : this.config.servers);
    try {
      const tool = toolset.tools[toolName];
      if (!tool) {
        const down = [...reports.values()].filter((r) => r.state !== 'live' && (!owner || r.name === owner.name));
        if (owner && down.length > 0) {
          this.io.stderr(`mcpferry: ${printable(toolName)}: server ${quoted(owner.name)} is ${Cli.describe(down[0])}\n`);
          return owner.enabled === false ? EXIT.usage : EXIT.connection;
        }
        const guesses = didYouMean(toolName, Object.values(toolset.tools));
        throw new RefusedError(`no tool ${quoted(toolName)}${guesses.length ? ` — did you mean ${guesses.map(printable).join(' or ')}?` : ' (see: mcpferry tools)'}`);
      }
      // With a tracer registered (e.g. `node --import ./otel.mjs`), the call runs in a span whose trace id
      // `--json` prints, so the call can be found in the tracing backend.
      let traceId: string | undefined;
      try {
        const result = await withSpan('mcpferry call', (id) => ((traceId = id), tool.execute(args)));
        // The server's text as it is, but for what would steer the terminal (its lines and tabs are kept).
        const text = result.content.map((block) => (block.type === 'text' ? printableLines(block.text) : `[${printable(block.type)}]`)).join('\n');
        this.out(traceId === undefined ? result : { ...result, traceId }, `${text}\n`);
        return EXIT.ok;
      } catch (error) {
        const code = error instanceof McpError ? error.code : 'mcp_internal_error';
        const message = error instanceof Error ? error.message : String(error);
        if (this.json) this.io.stdout(toJson({ error: { code, message }, ...(traceId !== undefined && { traceId }) }));
        this.io.stderr(`mcpferry: ${printable(message)}\n`);
        return EXIT.toolError;
      }
    } finally {
      await toolset.close();
    }
  }

  /**
   * `mcpferry resources` / `prompts`: each selected server with what `list` gives for it. A server that is
   * not connected is shown with its state; one whose listing fails with the error's code and message.
   */
  private async listings<T extends object>(only: string | undefined, list: (toolset: McpToolset, server: string) => Promise<T>): Promise<Listing<T>[]> {
    const { toolset, reports } = await this.connect(this.selected(only));
    try {
      return await Promise.all(
        [...reports.values()].map(async (report): Promise<Listing<T>> => {
          const base: Listed & Partial<T> = { name: report.name, state: report.state, ...(report.reason ? { reason: report.reason } : {}) } as Listed & Partial<T>;
          if (report.state !== 'live' && report.state !== 'stale') return { report, listed: base };
          try {
            return { report, listed: { ...base, ...(await list(toolset, report.name)) } };
          } catch (error) {
            return { report, listed: { ...base, error: errorOf(error) } };
          }
        }),
      );
    } finally {
      await toolset.close();
    }
  }

  /** The exit code of a listing: 3 when a server could not be connected, else 1 when a listing failed. */
  private static listed(results: Listing<object>[]): number {
    if (results.some((r) => r.report.unreachable)) return EXIT.connection;
    return results.some((r) => r.listed.error !== undefined) ? EXIT.toolError : EXIT.ok;
  }

  /** The first line of a listed server: its state, with a count or the listing's error. */
  private static heading(report: ServerReport, listed: Listed, counts: string): string {
    const state = `${printable(report.name)}  ${Cli.describe(report)}`;
    if (listed.error) return `${state}  (${printable(listed.error.code)}: ${printable(listed.error.message)})`;
    return report.state === 'live' || report.state === 'stale' ? `${state}  (${counts})` : state;
  }

  async resources(only?: string): Promise<number> {
    const results = await this.listings(only, async (toolset, server) => {
      const [resources, templates] = await Promise.all([toolset.listResources({ server }), toolset.listResourceTemplates({ server })]);
      // The server is the entry's name already.
      return { resources: resources.map(({ server: _, ...r }) => r), templates: templates.map(({ server: _, ...t }) => t) };
    });
    const lines = results.flatMap(({ report, listed }) => {
      const { resources = [], templates = [] } = listed;
      return [
        Cli.heading(report, listed, `${count(resources.length, 'resource')}, ${count(templates.length, 'template')}`),
        ...resources.map((r) => `  ${printable(r.uri)}  ${printable(r.name)}${r.mimeType ? `  ${printable(r.mimeType)}` : ''}${r.size !== undefined ? `  ${count(r.size, 'byte')}` : ''}`),
        ...templates.map((t) => `  template ${printable(t.uriTemplate)}  ${printable(t.name)}${t.mimeType ? `  ${printable(t.mimeType)}` : ''}`),
      ];
    });
    this.out({ servers: results.map((r) => r.listed) }, `${lines.join('\n')}\n`);
    return Cli.listed(results);
  }

  async prompts(only?: string): Promise<number> {
    const results = await this.listings(only, async (toolset, server) => ({ prompts: (await toolset.listPrompts({ server })).map(({ server: _, ...p }) => p) }));
    const lines = results.flatMap(({ report, listed }) => {
      const { prompts = [] } = listed;
      return [
        Cli.heading(report, listed, count(prompts.length, 'prompt')),
        ...prompts.flatMap((p) => [
          `  ${printable(p.name)}${p.description ? `  ${printable(p.description.split('\n')[0]).slice(0, 100)}` : ''}`,
          ...(p.arguments ?? []).map((a) => `    ${printable(a.name)}${a.required ? ' (required)' : ''}${a.description ? `  ${printable(a.description.split('\n')[0]).slice(0, 100)}` : ''}`),
        ]),
      ];
    });
    this.out({ servers: results.map((r) => r.listed) }, `${lines.join('\n')}\n`);
    return Cli.listed(results);
  }

  /**
   * Connect `name` alone and run `request` on it. A server not connected is reported as `call` reports
   * it (exit 2 when disabled, 3 when down); a failed request prints its error's code (exit 1).
   */
  private async request(name: string, request: (toolset: McpToolset) => Promise<number>): Promise<number> {
    const { toolset, reports } = await this.connect(this.selected(name));
    try {
      const report = reports.get(name)!;
      if (report.state !== 'live' && report.state !== 'stale') {
        this.io.stderr(`mcpferry: server ${quoted(name)} is ${Cli.describe(report)}\n`);
        return report.state === 'disabled' ? EXIT.usage : EXIT.connection;
      }
      try {
        return await request(toolset);
      } catch (error) {
        if (error instanceof UsageError || error instanceof RefusedError) throw error;
        const { code, message } = errorOf(error);
        if (this.json) this.io.stdout(toJson({ error: { code, message } }));
        this.io.stderr(`mcpferry: ${printable(code)}: ${printable(message)}\n`);
        return EXIT.toolError;
      }
    } finally {
      await toolset.close();
    }
  }

  /**
   * `resources read`: text as the server wrote it (terminal-safe, lines kept); a blob only by its MIME type
   * and size, never its bytes. `--out <file>` writes the one item's bytes (a text's as UTF-8) to `out`.
   */
  async readResource(server: string, uri: string, out?: string): Promise<number> {
    return this.request(server, async (toolset) => {
      const { contents } = await toolset.readResource(server, uri);
      const sizeOf = (c: McpResourceContents) => ('blob' in c ? c.blob.byteLength : Buffer.byteLength(c.text, 'utf8'));
      if (out !== undefined) {
        if (contents.length !== 1) throw new RefusedError(`${printable(uri)} has ${count(contents.length, 'item')}; --out writes one`);
        const [item] = contents;
        writeFileSync(out, 'blob' in item ? item.blob : item.text);
        const info = { uri: item.uri, ...(item.mimeType ? { mimeType: item.mimeType } : {}), size: sizeOf(item), out };
        this.out(info, `wrote ${count(info.size, 'byte')}${item.mimeType ? ` of ${printable(item.mimeType)}` : ''} to ${printable(out)}\n`);
        return EXIT.ok;
      }
      // --json: a blob as base64, with its size (JSON holds text).
      const shown = contents.map((c) => ('blob' in c ? { uri: c.uri, ...(c.mimeType ? { mimeType: c.mimeType } : {}), size: c.blob.byteLength, blob: Buffer.from(c.blob).toString('base64') } : c));
      const blobLine = (c: McpResourceContents) => `[blob ${printable(c.mimeType ?? 'of unknown type')}, ${count(sizeOf(c), 'byte')}; --out <file> writes it]`;
      const one = (c: McpResourceContents) => ('blob' in c ? blobLine(c) : c.text.endsWith('\n') ? c.text.slice(0, -1) : c.text);
      // Several items: each under its URI and type.
      const text = contents.length === 1 ? one(contents[0]) : contents.map((c) => `--- ${printable(c.uri)}${c.mimeType ? ` (${printable(c.mimeType)})` : ''}\n${one(c)}`).join('\n');
      this.out({ contents: shown }, `${text}\n`);
      return EXIT.ok;
    });
  }

  /** `prompts get`: each message as `role: text` (other content by its kind), terminal-safe. */
  async getPrompt(server: string, name: string, args: Record<string, string>): Promise<number> {
    return this.request(server, async (toolset) => {
      const result = await toolset.getPrompt(server, name, args);
      const content = (block: ContentBlock): string => {
        switch (block.type) {
          case 'text':
            return block.text;
          case 'image':
          case 'audio':
            return `[${block.type} ${printable(block.mimeType)}]`;
          case 'resource_link':
            return `[resource link ${printable(block.uri)}]`;
          default:
            return `[resource ${printable(block.resource.uri)}]`;
        }
      };
      const text = result.messages.map((m) => `${printable(m.role)}: ${content(m.content)}`).join('\n');
      this.out(result, `${text}\n`);
      return EXIT.ok;
    });
  }

  async login(name: string, how: { browser: boolean; device: boolean }): Promise<number> {
    const server = this.config.servers.find((s) => s.name === name)!;
    if (server.type === 'stdio') throw new UsageError(`${name} is a stdio server: it gets its credentials from env, not a login`);
    const oauth = oauthOf(withOAuth(server));
    if (oauth === undefined) throw new UsageError(`${name} has an Authorization header configured: there is nothing to log in to`);
    const settings = typeof oauth === 'object' ? oauth : {};
    const entry: McpServer = { ...server, enabled: true, oauth: how.device ? { ...settings, grant: 'device_code' } : oauth };
    const onAuthorizationUrl = (url: string, prompt: McpAuthorizationPrompt) => {
      printAuthorizationUrl(url, prompt);
      if (how.browser) openBrowser(url);
    };
    const { toolset, reports } = await this.connect([entry], { tokenStore: this.tokenStore(), onAuthorizationUrl });
    await toolset.close();
    const report = reports.get(name)!;
    if (report.state !== 'live') {
      this.out({ name, loggedIn: false, reason: report.reason }, `login to ${printable(name)} failed: ${printable(report.reason ?? '')}\n`);
      return EXIT.connection;
    }
    this.out({ name, loggedIn: true }, `logged in to ${printable(name)}\n`);
    return EXIT.ok;
  }

  async logout(name: string): Promise<number> {
    const server = this.config.servers.find((s) => s.name === name)!;
    if (server.type === 'stdio') throw new UsageError(`${name} is a stdio server: there is no login to end`);
    const entry = withOAuth({ ...server, enabled: true });
    if (oauthOf(entry) === undefined) throw new UsageError(`${name} has an Authorization header configured: there is no login to end`);
    await logoutMcpServer(entry, { tokenStore: this.tokenStore() });
    this.out({ name, loggedOut: true }, `logged out of ${printable(name)}\n`);
    return EXIT.ok;
  }
}

/** A failure's stable code (an McpError's, else `mcp_internal_error`) and message. */
function errorOf(error: unknown): { code: string; message: string } {
  return { code: error instanceof McpError ? error.code : 'mcp_internal_error', message: error instanceof Error ? error.message : String(error) };
}

/** The most guesses offered for a tool name not found. */
const MAX_GUESSES = 3;

/**
 * The projected names a mistyped tool name most likely meant: tools whose remote name (the server's own)
 * it is, else the names (projected or remote) closest to it by edit distance, within a quarter of its length
 * (at least one edit). Case is ignored.
 */
function didYouMean(typed: string, tools: { name: string; remoteName: string }[]): string[] {
  const wanted = typed.toLowerCase();
  const exact = tools.filter((t) => t.remoteName.toLowerCase() === wanted).map((t) => t.name);
  if (exact.length > 0) return exact.slice(0, MAX_GUESSES);
  const within = Math.max(1, Math.floor(wanted.length / 4));
  // A length further off than the edits allowed can't be within them: not measured (a catalogue of
  // thousands of long names would make each guess quadratic in both).
  const near = (name: string) => (Math.abs(name.length - wanted.length) <= within ? editDistance(wanted, name.toLowerCase()) : Infinity);
  return tools
    .map((t) => ({ name: t.name, distance: Math.min(near(t.name), near(t.remoteName)) }))
    .filter((t) => t.distance <= within)
    .sort((a, b) => a.distance - b.distance || a.name.localeCompare(b.name))
    .slice(0, MAX_GUESSES)
    .map((t) => t.name);
}

/** Levenshtein distance: the fewest one-character insertions, deletions and substitutions from `a` to `b`. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length];
}

/** `1 tool`, `2 tools`. */
function count(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}

function urlWithoutQuery(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.origin}${parsed.pathname}`;
  } catch {
    return '(invalid url)';
  }
}

/** The tier the engine chose for `server`, read from its system-prompt listing (`- name: N tools, schemas …`). */
function disclosureTier(prompt: string, server: string): 'full' | 'deferred' | 'bare' {
  const safe = server.replace(/[^A-Za-z0-9_-]/g, '_');
  const line = prompt.split('\n').find((l) => l.startsWith(`- `) && l.includes(safe) && /\d+ tools?/.test(l)) ?? '';
  if (line.includes('schemas abbreviated')) return 'deferred';
  if (line.includes('schemas omitted')) return 'bare';
  return 'full';
}

/** Variables the browser opener must not inherit: the token store's key and file, the CLI's own settings. */
const PRIVATE_ENV = /^MCPFERRY_(TOKEN_|STORE$|TRUST_FILE$)/i;

/**
 * Open `url` in the person's browser, detached; a failure leaves the printed URL to use by hand. Only
 * http(s) URLs are opened (the URL comes from an authorization server, and openers run other schemes'
 * handlers), and the opener gets the environment without the CLI's secrets.
 */
function openBrowser(url: string): void {
  let scheme: string;
  try {
    scheme = new URL(url).protocol;
  } catch {
    return;
  }
  if (scheme !== 'https:' && scheme !== 'http:') return;
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !PRIVATE_ENV.test(name)));
  // On Windows not `explorer <url>`: explorer splits its argument at commas, so `,/select,` would be a switch.
  const [command, ...args] =
    process.platform === 'darwin' ? ['open', url] : process.platform === 'win32' ? ['rundll32', 'url.dll,FileProtocolHandler', url] : ['xdg-open', url];
  try {
    const child = spawn(command, args, { stdio: 'ignore', detached: true, env });
    child.on('error', () => {});
    child.unref();
  } catch {
    // No opener: the URL is printed.
  }
}
