// Loads a Node-API addon in a musl process (scripts/build-platforms.mjs builds this with zig for each
// musl target): musl's dynamic loader must bind every symbol the addon imports right away (RTLD_NOW).
// Node-API itself comes from stubs linked into this host; the addon's entry point is looked up, not run.
#include <dlfcn.h>
#include <stdio.h>
#include <sys/utsname.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s <addon.node>\n", argv[0]);
    return 2;
  }
  void *addon = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!addon) {
    fprintf(stderr, "dlopen failed: %s\n", dlerror());
    return 1;
  }
  if (!dlsym(addon, "napi_register_module_v1")) {
    fprintf(stderr, "no napi_register_module_v1: %s\n", dlerror());
    return 1;
  }
  struct utsname machine;
  uname(&machine);
  printf("%s musl process: loaded with every symbol bound (RTLD_NOW), napi_register_module_v1 present\n", machine.machine);
  return 0;
}
