// Imports a package from scripts/node22/node_modules: a dynamic import resolves from the importing file.
export const load = (specifier) => import(specifier);
/** Where a package of scripts/node22 resolves to, as a file: URL (to load it elsewhere, or time its import). */
export const resolve = (specifier) => import.meta.resolve(specifier);
