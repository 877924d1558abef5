/**
 * Hermes-style skill catalogs: an `<available_skills>` block with category header lines and
 * `- name: description` entries, plus the `skills_list` / `skill_view` discovery tools a host
 * offers so pruned skills stay reachable.
 */
import fc from 'fast-check';

/** One entry of a generated skill catalog. */
export interface SkillEntry {
  readonly name: string;
  readonly category: string;
  readonly description: string;
}

/** A generated skill catalog: its entries and the text block they render to. */
export interface SkillCatalog {
  readonly entries: readonly SkillEntry[];
  /** The rendered block, `<available_skills>` … `</available_skills>`. */
  readonly block: string;
}

const SKILLS: readonly SkillEntry[] = [
  { name: 'github-release', category: 'github', description: 'Publish a tagged GitHub release with notes' },
  { name: 'pull-request-review', category: 'github', description: 'Review a pull request and leave comments' },
  { name: 'issue-triage', category: 'github', description: 'Label and prioritise new issues' },
  { name: 'calendar', category: 'productivity', description: 'Create and move calendar events' },
  { name: 'email', category: 'productivity', description: 'Draft and send email replies' },
  { name: 'spreadsheets', category: 'data', description: 'Edit spreadsheet cells, formulas and charts' },
  { name: 'sql', category: 'data', description: 'Query a SQL database and explain plans' },
  { name: 'csv-clean', category: 'data', description: 'Normalise CSV columns and encodings' },
  { name: 'images', category: 'media', description: 'Resize, crop and convert images' },
  { name: 'slides', category: 'media', description: 'Build a slide deck from an outline' },
  { name: 'docker-debug', category: 'devops', description: 'Inspect containers, logs and health checks' },
  { name: 'k8s-rollout', category: 'devops', description: 'Roll out and roll back Kubernetes deployments' },
  { name: 'terraform-plan', category: 'devops', description: 'Plan and apply Terraform changes safely' },
  { name: 'pdf-extract', category: 'documents', description: 'Extract text and tables from PDF files' },
  { name: 'translate', category: 'documents', description: 'Translate documents between languages: français, 日本語' },
  { name: 'unicode-notes', category: 'documents', description: 'Keep notes with emoji 📝 and 𝔣𝔞𝔫𝔠𝔶 text' },
  { name: 'benchmark', category: 'engineering', description: 'Run and compare performance benchmarks' },
  { name: 'refactor', category: 'engineering', description: 'Rename symbols and move modules across files' },
  { name: 'release-notes', category: 'engineering', description: 'Write release notes from merged pull requests' },
  { name: 'security-audit', category: 'engineering', description: 'Scan dependencies for known vulnerabilities' },
];

/**
 * Render entries as a Hermes catalog block (categories in order of first appearance).
 *
 * @example
 * import { renderSkillCatalog } from 'token-terminator/testing';
 * renderSkillCatalog([{ category: 'git', name: 'bisect', description: 'Find a bad commit' }]);
 * // '<available_skills>\n  git:\n    - bisect: Find a bad commit\n</available_skills>'
 */
export function renderSkillCatalog(entries: readonly SkillEntry[]): string {
  const byCategory = new Map<string, SkillEntry[]>();
  for (const e of entries) byCategory.set(e.category, [...(byCategory.get(e.category) ?? []), e]);
  const lines = ['<available_skills>'];
  for (const [category, list] of byCategory) {
    lines.push(`  ${category}:`);
    for (const e of list) lines.push(`    - ${e.name}: ${e.description}`);
  }
  lines.push('</available_skills>');
  return lines.join('\n');
}

/** Options of the skill catalog arbitrary; every field is optional. */
export interface SkillCatalogOptions {
  /** Fewest entries. @defaultValue 3 (below the 8 a skill gate needs, so small catalogs occur too) */
  readonly minSkills?: number;
  /** Most entries. @defaultValue 20 */
  readonly maxSkills?: number;
}

/**
 * A catalog drawn from a fixed pool of realistic skills (some with Unicode descriptions).
 *
 * @example
 * fc.assert(fc.property(skillCatalog({ minSkills: 8 }), (c) => c.block.startsWith('<available_skills>')));
 */
export function skillCatalog(options: SkillCatalogOptions = {}): fc.Arbitrary<SkillCatalog> {
  const min = options.minSkills ?? 3;
  const max = Math.min(options.maxSkills ?? SKILLS.length, SKILLS.length);
  if (min > max) throw new RangeError(`skillCatalog: minSkills ${min} > maxSkills ${max}`);
  return fc
    .shuffledSubarray([...SKILLS], { minLength: min, maxLength: max })
    .map((entries) => ({ entries, block: renderSkillCatalog(entries) }));
}

/**
 * A user prompt that mentions some of the catalog's skills (or none).
 *
 * @example
 * const prompt = skillCatalog().chain((catalog) => skillPrompt(catalog));
 */
export function skillPrompt(catalog: SkillCatalog): fc.Arbitrary<string> {
  return fc.oneof(
    fc.constant('What is the weather like today?'),
    fc
      .constantFrom(...catalog.entries)
      .map((e) => `Please ${e.description.toLowerCase()} for the current project (${e.name}).`),
    fc.constant('Publish the current project as a GitHub release.'),
  );
}

/** The discovery tools, as bare names; request builders render them per format. */
export const SKILL_TOOLS = [
  {
    name: 'skills_list',
    description: 'List installed skills, optionally filtered by a query',
    parameters: { type: 'object', properties: { query: { type: 'string' } } },
  },
  {
    name: 'skill_view',
    description: 'Show the full instructions of one skill',
    parameters: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
  },
] as const;
