/* What the C test programs share: CHECK(cond) prints the condition and
 * errno when it fails and counts the failure; finish() ends main with
 * "ok" and 0 when every check held, 1 otherwise. */
#ifndef UWARP_VERBS_TEST_CHECK_H
#define UWARP_VERBS_TEST_CHECK_H

#include <errno.h>
#include <stdio.h>

static int failures;

#define CHECK(cond)                                                        \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "%s:%d: failed: %s (errno %d)\n",  \
				__FILE__, __LINE__, #cond, errno);         \
			failures++;                                        \
		}                                                          \
	} while (0)

static int finish(void)
{
	if (failures)
		return 1;
	printf("ok\n");
	return 0;
}

#endif
