/* ThreadSanitizer annotations for where the components hand memory to Open
 * MPI and take it back: Open MPI is not instrumented, so TSan cannot see
 * the synchronization it does in between (its free lists and request
 * completion use atomics of their own).  EFA_TSAN is 1 in a
 * -fsanitize=thread build (scripts/build-instrumented.sh tsan); elsewhere
 * the annotations are nothing. */
#ifndef EFA_TSAN_H
#define EFA_TSAN_H

#if defined(__SANITIZE_THREAD__)
#define EFA_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define EFA_TSAN 1
#endif
#endif
#ifndef EFA_TSAN
#define EFA_TSAN 0
#endif

#if EFA_TSAN
#ifdef __cplusplus
extern "C" {
#endif
/* The TSan runtime's (compiler-rt's tsan_interface.h). */
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#ifdef __cplusplus
}
#endif
#define EFA_TSAN_ACQUIRE(p) __tsan_acquire((void *)(p))
#define EFA_TSAN_RELEASE(p) __tsan_release((void *)(p))
#else
#define EFA_TSAN_ACQUIRE(p) ((void)0)
#define EFA_TSAN_RELEASE(p) ((void)0)
#endif

#endif
