/**
 * The API-equivalent rate card (`TOKEN_TERMINATOR_EQ_*`): list prices in USD per million tokens and
 * a label, so the report can say what the measured tokens would have cost at those prices. It is a
 * labelled equivalent, not what a subscription or OAuth plan actually charges at the margin; the
 * report says so wherever it shows one.
 */
import type { Config } from '../config/types.js';

/** USD per million tokens of each kind, and the label the report shows beside them. */
export interface RateCard {
  /** Shown with every figure priced by this card (TOKEN_TERMINATOR_EQ_RATE_CARD; empty = "API-equivalent"). */
  readonly label: string;
  /** Uncached input tokens (TOKEN_TERMINATOR_EQ_INPUT_USD_PER_M). */
  readonly inputUsdPerM: number;
  /** Output tokens (TOKEN_TERMINATOR_EQ_OUTPUT_USD_PER_M). */
  readonly outputUsdPerM: number;
  /** Input tokens read from the provider's prompt cache (TOKEN_TERMINATOR_EQ_CACHE_READ_USD_PER_M). */
  readonly cacheReadUsdPerM: number;
  /** Input tokens written to the provider's prompt cache (TOKEN_TERMINATOR_EQ_CACHE_WRITE_USD_PER_M). */
  readonly cacheWriteUsdPerM: number;
}

/** The config fields a rate card is read from. */
export type RateCardConfig = Pick<
  Config,
  'eqInputUsdPerM' | 'eqOutputUsdPerM' | 'eqCacheReadUsdPerM' | 'eqCacheWriteUsdPerM' | 'eqRateCard'
>;

/**
 * The configured rate card, or undefined when every price is 0 (the default: no card, and the
 * report shows no USD figure).
 *
 * @example
 * const card = rateCardFromConfig(loadConfig()); // TOKEN_TERMINATOR_EQ_INPUT_USD_PER_M=2.5 → { inputUsdPerM: 2.5, … }
 */
export function rateCardFromConfig(config: RateCardConfig): RateCard | undefined {
  const card: RateCard = {
    label: config.eqRateCard.trim() === '' ? 'API-equivalent' : config.eqRateCard.trim(),
    inputUsdPerM: config.eqInputUsdPerM,
    outputUsdPerM: config.eqOutputUsdPerM,
    cacheReadUsdPerM: config.eqCacheReadUsdPerM,
    cacheWriteUsdPerM: config.eqCacheWriteUsdPerM,
  };
  const priced = card.inputUsdPerM + card.outputUsdPerM + card.cacheReadUsdPerM + card.cacheWriteUsdPerM > 0;
  return priced ? Object.freeze(card) : undefined;
}

/** One priced line: the tokens it counts and their cost at the card's price, or undefined tokens when not measured. */
export interface PricedLine {
  readonly item: 'input, raw' | 'input, sent' | 'output' | 'cache reads' | 'cache writes';
  /** The figures key the tokens were read from. */
  readonly key: string;
  readonly usdPerM: number;
  readonly tokens: number | undefined;
  readonly usd: number | undefined;
}

/** The token counts a level of the report figures may carry (the input counts are always there). */
export interface PricedLevel {
  readonly raw_tokens: number;
  readonly final_tokens: number;
  readonly output_tokens?: number | undefined;
  readonly cache_read_tokens?: number | undefined;
  readonly cache_write_tokens?: number | undefined;
}

/**
 * Price one level of figures: request tokens before (raw) and after (sent) the pipeline at the input
 * price, and output, cache-read and cache-write tokens at theirs when the figures measured them.
 *
 * @example
 * priceFigures({ raw_tokens: 2_000_000, final_tokens: 500_000 }, card)[1]!.usd; // 1.25 at $2.50 per M
 */
export function priceFigures(level: PricedLevel, card: RateCard): PricedLine[] {
  const line = (item: PricedLine['item'], key: string, usdPerM: number, tokens: number | undefined): PricedLine => ({
    item,
    key,
    usdPerM,
    tokens,
    usd: tokens === undefined ? undefined : (tokens * usdPerM) / 1_000_000,
  });
  return [
    line('input, raw', 'raw_tokens', card.inputUsdPerM, level.raw_tokens),
    line('input, sent', 'final_tokens', card.inputUsdPerM, level.final_tokens),
    line('output', 'output_tokens', card.outputUsdPerM, level.output_tokens),
    line('cache reads', 'cache_read_tokens', card.cacheReadUsdPerM, level.cache_read_tokens),
    line('cache writes', 'cache_write_tokens', card.cacheWriteUsdPerM, level.cache_write_tokens),
  ];
}
