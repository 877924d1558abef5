/** The SkillGate fixture of facts §2.16: 8 skills in 4 categories (descriptions written here). */
export const SKILL_PROMPT = 'Publish the current project as a GitHub release.';

export function skillCatalogText(): string {
  return [
    'You can load skills on demand.',
    '<available_skills>',
    'development:',
    '    - github-release: Create a tagged GitHub release with generated notes and uploaded assets',
    '    - pull-request-review: Review a pull request diff and leave inline comments',
    'productivity:',
    '    - calendar: Create, move and list calendar events and meeting invitations',
    '    - email: Draft, search and send email messages from the mailbox',
    'data:',
    '    - spreadsheets: Read and edit spreadsheet workbooks, formulas and charts',
    '    - sql: Write and run SQL queries against a configured database',
    'media:',
    '    - images: Generate, crop and convert image files',
    '    - slides: Build slide decks from an outline with speaker notes',
    '</available_skills>',
    'Always answer briefly.',
  ].join('\n');
}

export const DISCOVERY_TOOLS = [
  { type: 'function', function: { name: 'skills_list', parameters: { type: 'object' } } },
  { type: 'function', function: { name: 'skill_view', parameters: { type: 'object' } } },
];
