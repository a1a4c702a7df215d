// Frozen all the way down: what one holder (a toolset's tool, a binding, a handle) keeps may be shared
// with another, so none of them may change it.

/**
 * Freezes `value` and every object it reaches through its own enumerable properties, and returns it; an object
 * already frozen is taken as done. Connecting a big catalogue freezes every tool's schema, so the walk allocates
 * nothing per object: `for...in` (which V8 enumerates from a cached key list) on plain objects and arrays, and
 * only while Array.prototype and Object.prototype have no enumerable property, which `for...in` would visit too;
 * anything else walks `Object.keys`.
 */
export function deepFreeze<T>(value: T): T {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return value;
  Object.freeze(value);
  const prototype: unknown = Object.getPrototypeOf(value);
  if ((prototype === Object.prototype || prototype === Array.prototype) && !prototypesEnumerate()) {
    for (const key in value) freezeMember((value as Record<string, unknown>)[key]);
  } else {
    for (const key of Object.keys(value)) freezeMember((value as Record<string, unknown>)[key]);
  }
  return value;
}

function freezeMember(member: unknown): void {
  if (typeof member === 'object' && member !== null) deepFreeze(member);
}

/** Whether Array.prototype or Object.prototype (its prototype) has an enumerable property: something added one. */
function prototypesEnumerate(): boolean {
  for (const _ in Array.prototype) return true;
  return false;
}
