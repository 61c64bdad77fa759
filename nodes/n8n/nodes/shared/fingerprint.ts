/**
 * What a claim is about: the payload (hashed by the server, never stored) or a ready
 * fingerprint, and the version for upsert-if-newer claims. Pure functions, no n8n imports.
 */
import type { JsonObject, JsonValue } from './contract';

export type PayloadMode = 'wholeItem' | 'fields' | 'custom' | 'fingerprint' | 'none';

/** The claim body's `payload` or `fingerprint` member, or nothing. */
export interface FingerprintPart {
	payload?: JsonValue;
	fingerprint?: string;
}

export class InputError extends Error {}

/** The value at a dot path (`body.customer.id`; `items.0.sku` indexes arrays), or undefined. */
export function valueAt(source: unknown, path: string): unknown {
	let current: unknown = source;
	for (const part of path.split('.')) {
		if (current === null || typeof current !== 'object') return undefined;
		current = (current as Record<string, unknown>)[part];
	}
	return current;
}

/** The dot paths of a comma- or newline-separated list, trimmed, without empties. */
export function parseFieldList(fields: string): string[] {
	return fields
		.split(/[,\n]/)
		.map((field) => field.trim())
		.filter((field) => field.length > 0);
}

/**
 * The chosen fields of an item as one object keyed by path: `{"body.amount": 1250}`. A missing
 * field is `null`, so "absent" and "present but null" fingerprint alike, and a payload always has
 * the same members whatever the item holds.
 */
export function pickFields(item: JsonObject, paths: string[]): JsonObject {
	if (paths.length === 0) throw new InputError('Choose at least one field for the payload');
	const picked: JsonObject = {};
	for (const path of paths) {
		const value = valueAt(item, path);
		picked[path] = value === undefined ? null : (value as JsonValue);
	}
	return picked;
}

/**
 * The fingerprint part of a claim for one item.
 * - wholeItem: the item's JSON (for webhook items prefer `fields`: headers differ per delivery)
 * - fields: the chosen dot paths, see pickFields
 * - custom: any JSON value the user's expression produced (a JSON string is parsed)
 * - fingerprint: a ready string, compared exactly by the server
 * - none: no fingerprint: the claim matches any earlier payload
 */
export function fingerprintPart(
	mode: PayloadMode,
	item: JsonObject,
	options: { fields?: string; custom?: unknown; fingerprint?: unknown },
): FingerprintPart {
	switch (mode) {
		case 'wholeItem':
			return { payload: item };
		case 'fields':
			return { payload: pickFields(item, parseFieldList(options.fields ?? '')) };
		case 'custom':
			return { payload: customPayload(options.custom) };
		case 'fingerprint': {
			const value = options.fingerprint;
			if ((typeof value !== 'string' && typeof value !== 'number') || String(value) === '') {
				throw new InputError('The fingerprint must be a non-empty string');
			}
			return { fingerprint: String(value) };
		}
		case 'none':
			return {};
	}
	throw new InputError(`Unknown payload mode "${String(mode)}"`);
}

function customPayload(value: unknown): JsonValue {
	if (typeof value === 'string') {
		try {
			return JSON.parse(value) as JsonValue;
		} catch {
			return value; // a plain string is a valid JSON value of its own
		}
	}
	if (value === undefined) return null;
	return value as JsonValue;
}

const DIGITS = /^\d+$/;

/**
 * The claim's `version` from what the user's expression gave, or undefined for none.
 * Integers are sent as JSON numbers, so only exact ones (up to 2^53 - 1) are accepted: a
 * larger number has already lost digits in JavaScript. Anything else is sent as a string and
 * must be an RFC 3339 timestamp (the server checks).
 */
export function versionOf(value: unknown): number | string | undefined {
	if (value === undefined || value === null || value === '') return undefined;
	if (typeof value === 'number') {
		if (!Number.isSafeInteger(value) || value < 0) {
			throw new InputError(`Version ${value} is not a whole number from 0 to 2^53 - 1`);
		}
		return value;
	}
	if (typeof value === 'string') {
		const text = value.trim();
		if (DIGITS.test(text)) {
			const number = Number(text);
			if (!Number.isSafeInteger(number)) {
				throw new InputError(
					`Version ${text} is above 2^53 - 1 and cannot be sent exactly; use a timestamp or a smaller number`,
				);
			}
			return number;
		}
		return text;
	}
	if (value instanceof Date) return value.toISOString();
	const asIso = (value as { toISO?: () => string | null }).toISO; // a Luxon DateTime
	if (typeof asIso === 'function') {
		const iso = asIso.call(value);
		if (iso) return iso;
	}
	throw new InputError('The version must be a whole number or an RFC 3339 timestamp');
}
