/*
 * mallocshim.c - route the malloc family to glibc's allocator.
 *
 * Why this exists: Debian's redis-server links jemalloc, and preloading
 * libfaketime into it deadlocks at start-up. jemalloc's initialisation calls
 * clock_gettime, which libfaketime intercepts; libfaketime's own lazy
 * initialisation then calls malloc, which re-enters jemalloc while jemalloc
 * holds its init lock. The process hangs before it serves a single command
 * (also with libfaketimeMT and FAKETIME_DONT_FAKE_MONOTONIC=1).
 *
 * Preloaded BEFORE libfaketime (LD_PRELOAD=<this>:<libfaketime>), this object
 * defines every allocation entry point the process can reach and forwards it
 * to glibc's __libc_* allocator, which never reads the clock. jemalloc stays
 * loaded but is never initialised. Every pointer is allocated and freed by
 * glibc, so the pairs always match.
 *
 * It is test tooling only: compiled at run time by package
 * github.com/quorumlock/quorumlock/faultinject/clockskew (gcc -shared -fPIC)
 * and by docker/Dockerfile. Nothing here is used by the lock library itself.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

extern void *__libc_malloc(size_t size);
extern void __libc_free(void *ptr);
extern void *__libc_calloc(size_t nmemb, size_t size);
extern void *__libc_realloc(void *ptr, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);
extern void *__libc_valloc(size_t size);
extern void *__libc_pvalloc(size_t size);

void *malloc(size_t size) { return __libc_malloc(size); }
void free(void *ptr) { __libc_free(ptr); }
void *calloc(size_t nmemb, size_t size) { return __libc_calloc(nmemb, size); }
void *realloc(void *ptr, size_t size) { return __libc_realloc(ptr, size); }
void *memalign(size_t alignment, size_t size) { return __libc_memalign(alignment, size); }
void *valloc(size_t size) { return __libc_valloc(size); }
void *pvalloc(size_t size) { return __libc_pvalloc(size); }

void *aligned_alloc(size_t alignment, size_t size) {
	if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
		errno = EINVAL;
		return NULL;
	}
	return __libc_memalign(alignment, size);
}

int posix_memalign(void **memptr, size_t alignment, size_t size) {
	if (alignment == 0 || (alignment & (alignment - 1)) != 0 ||
	    alignment % sizeof(void *) != 0)
		return EINVAL;
	void *p = __libc_memalign(alignment, size);
	if (p == NULL)
		return ENOMEM;
	*memptr = p;
	return 0;
}

/*
 * glibc exports no __libc_malloc_usable_size. RTLD_NEXT would find jemalloc's
 * malloc_usable_size first (it is loaded before libc), which must never see a
 * glibc pointer, so look the symbol up in libc itself, by version.
 */
typedef size_t (*usable_size_fn)(void *);
static usable_size_fn libc_usable_size;

size_t malloc_usable_size(void *ptr) {
	if (libc_usable_size == NULL) {
		void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
		if (libc != NULL) {
			libc_usable_size = (usable_size_fn)dlvsym(libc, "malloc_usable_size", "GLIBC_2.2.5");
			dlclose(libc);
		}
		if (libc_usable_size == NULL)
			return 0; /* allowed: "at least 0 usable bytes" */
	}
	return libc_usable_size(ptr);
}
