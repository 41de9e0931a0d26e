/* An application that asks the hsched daemon for a reservation for its own
 * thread through libhsched_coop (hsched_rm_*), without root: prints what
 * it got, holds it for a moment, releases it. Used by
 * crates/linux/tests/rm_live.rs. Usage: request SOCKET GUARANTEE */
#include <stdio.h>
#include <unistd.h>
#include "hsched_coop.h"

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s SOCKET GUARANTEE\n", argv[0]);
        return 2;
    }
    HschedRm *rm = hsched_rm_open(argv[1]);
    if (!rm) {
        printf("no daemon\n");
        return 1;
    }
    int32_t state = 0;
    char msg[256];
    int64_t id = hsched_rm_request(rm, 0, argv[2], &state, msg, sizeof msg);
    if (id < 0) {
        printf("error %lld: %s\n", (long long)id, msg);
        hsched_rm_close(rm);
        return 1;
    }
    printf("request %lld state %d\n", (long long)id, (int)state);
    fflush(stdout);
    /* Hold the guarantee while the test looks at the daemon's tree. */
    usleep(1500 * 1000);
    int r = hsched_rm_release(rm, id);
    printf("released %d\n", r);
    hsched_rm_close(rm);
    return r == 0 ? 0 : 1;
}
