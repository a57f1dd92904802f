/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlc_comm_init_rank with a unique id whose text fills all of `internal`
 * (no terminating NUL) is rejected with MLC_ERR_INVALID_ARG and a message,
 * and nothing past the id is read: the id is followed here by more text, which
 * an unbounded read would take into the job id (and ASan reports).
 */
#include <stdio.h>
#include <string.h>
#include "mlcomm.h"

int main(void)
{
    struct {
        mlc_unique_id_t id;
        char after[64];
    } s;
    mlc_status_t st = mlc_get_unique_id(&s.id);
    if (st != MLC_SUCCESS) {
        printf("FAIL: mlc_get_unique_id: %s\n", mlc_last_error());
        return 1;
    }
    size_t used = strlen(s.id.internal);
    memset(s.id.internal + used, 'a', sizeof s.id.internal - used);
    memset(s.after, 'b', sizeof s.after - 1);
    s.after[sizeof s.after - 1] = '\0';
    mlc_comm_t *comm = NULL;
    st = mlc_comm_init_rank(&s.id, 1, 0, NULL, &comm);
    if (st != MLC_ERR_INVALID_ARG) {
        printf("FAIL: an unterminated unique id gave %s (expected MLC_ERR_INVALID_ARG): %s\n",
               mlc_status_name(st), st == MLC_SUCCESS ? "accepted" : mlc_last_error());
        if (comm) mlc_comm_free(comm);
        return 1;
    }
    if (strstr(mlc_last_error(), "unique id") == NULL) {
        printf("FAIL: the message does not name the unique id: %s\n", mlc_last_error());
        return 1;
    }
    printf("ok: %s\n", mlc_last_error());
    return 0;
}
