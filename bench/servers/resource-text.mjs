// W11's text resource, shared by the server that serves it (protocol.mjs) and the workload that checks what
// each client reads back (lib/workloads.mjs): lines of ASCII, so its JSON string needs `\n` escapes as a real
// file's does, cut to `size` bytes.
export function resourceText(size) {
  let text = '';
  for (let line = 1; text.length < size; line++) text += `line ${String(line).padStart(4, '0')}: the quick brown fox jumps over the lazy dog.\n`;
  return text.slice(0, size);
}
