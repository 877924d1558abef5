import { describe, expect, it } from 'vitest';
import {
  findCatalogs,
  lexicalTokens,
  parseEntries,
  renderCatalog,
  selectSkills,
} from '../../src/compile/skill-catalog.js';
import { SKILL_PROMPT, skillCatalogText } from '../operators/skill-fixture.js';

describe('skill catalog', () => {
  it('parses categories and entries, splitting at the last ": "', () => {
    const entries = parseEntries(
      '\n[status line]\ngithub:\n  - github-release: Publish: tag a release\n  - bare-name\nnotes\n',
    );
    expect(entries).toEqual([
      { name: 'github-release: Publish', description: 'tag a release', category: 'github' },
      { name: 'bare-name', description: '', category: 'github' },
    ]);
  });
  it('tokenizes case-folded word runs without stopwords or short tokens', () => {
    expect(lexicalTokens('Publish the current project as a GitHub release.')).toEqual([
      'publish',
      'current',
      'project',
      'github',
      'release',
    ]);
  });
  it('keeps github-release for the release prompt and drops calendar', () => {
    const [block] = findCatalogs(skillCatalogText());
    expect(block!.entries).toHaveLength(8);
    const kept = selectSkills(SKILL_PROMPT, block!.entries, { minScore: 2, maxSkills: 0, alwaysKeep: [] }).map(
      (e) => e.name,
    );
    expect(kept[0]).toBe('github-release');
    expect(kept).not.toContain('calendar');
    expect(8 - kept.length).toBeGreaterThanOrEqual(6);
    const capped = selectSkills(SKILL_PROMPT, block!.entries, { minScore: 2, maxSkills: 2, alwaysKeep: [] });
    expect(capped.length).toBeLessThanOrEqual(2);
  });
  it('renders a block the parser reads back to the kept entries', () => {
    const [block] = findCatalogs(skillCatalogText());
    const kept = block!.entries.slice(0, 3);
    const text = renderCatalog(kept, 8);
    expect(findCatalogs(text)[0]!.entries).toEqual(kept);
    expect(findCatalogs(renderCatalog([], 8))[0]!.entries).toEqual([]);
    expect(renderCatalog([], 8)).toContain('skills_list');
  });
});
