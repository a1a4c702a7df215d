// Frozen all the way down: what one holder (a toolset's tool, a binding, a handle) keeps may be shared
// with another, so none of them may change it.

/** Freezes `value` and everything it reaches, and returns it; an object already frozen is taken as done. */
export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const member of Object.values(value)) deepFreeze(member);
  }
  return value;
}
