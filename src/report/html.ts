/** HTML helpers of the report: escaping, and numbers tagged with the JSON key they show. */

/** Numbers as the report shows them: grouped, at most 4 decimals. */
export const fmt = new Intl.NumberFormat('en-US', { maximumFractionDigits: 4 });

/** Escape text for HTML content and attribute values. */
export function esc(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

/** A number as shown: the value itself, grouped, at most 4 decimals; tagged with its key and exact value. */
export function num(key: string, value: number, suffix = ''): string {
  return `<span class="num" data-key="${esc(key)}" data-value="${value}">${fmt.format(value)}${esc(suffix)}</span>`;
}
