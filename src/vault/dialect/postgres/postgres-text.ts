/** Values PostgreSQL can store: text cannot hold NUL, content goes as its UTF-8 bytes. */

/** Text for a text column (NUL → U+FFFD). */
export function pgText(value: string): string {
  return value.includes('\u0000') ? value.replace(/\u0000/g, '\ufffd') : value;
}

export function encodeContent(content: string): Uint8Array {
  return Buffer.from(content, 'utf8');
}

export function decodeContent(value: string | Uint8Array): string {
  return typeof value === 'string'
    ? value
    : Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('utf8');
}
