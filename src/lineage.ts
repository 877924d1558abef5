/**
 * Weak links from a value to the one it grew from (a recognised list to the previous request's, an
 * extended view's slots to the slots it extended), followed a fixed number of steps back. Each link
 * holds its parent alive, so the link one step past the ones followed is cut when a new link is
 * made: a long session keeps its last few lists reachable through the chain, not all of them.
 *
 * @example
 * const grew = new Lineage<object[], object[]>(3, (parent) => parent);
 * grew.link(b, a); // b grew from a
 * grew.get(b) === a; // true
 */
export class Lineage<K extends object, L> {
  readonly #links = new WeakMap<K, L>();

  constructor(
    /** Links its readers follow back; the one past them is cut. */
    readonly steps: number,
    /** The parent a link names. */
    private readonly parentOf: (link: L) => K,
  ) {}

  /** The link recorded for `child`, if any. */
  get(child: K): L | undefined {
    return this.#links.get(child);
  }

  has(child: K): boolean {
    return this.#links.has(child);
  }

  /** Record that `child` grew from the parent `link` names, and cut the chain `steps` links back. */
  link(child: K, link: L): void {
    this.#links.set(child, link);
    let end: K = child;
    for (let step = 0; step < this.steps; step++) {
      const next = this.#links.get(end);
      if (next === undefined) return;
      end = this.parentOf(next);
    }
    this.#links.delete(end);
  }
}
