/* SPDX-License-Identifier: BSD-3-Clause */
#include "host.h"
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "config.h"

void mlc_host_identity(char *id, size_t id_len, char *name, size_t name_len)
{
    const char *forced = mlc_env_text(MLC_ENV_HOST_ID);
    if (forced) {
        snprintf(id, id_len, "id:%s", forced);
        snprintf(name, name_len, "%s", forced);
        return;
    }
    char host[256] = "localhost";
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    char boot[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof boot, f)) boot[0] = '\0';
        fclose(f);
        boot[strcspn(boot, "\n")] = '\0';
    }
    snprintf(id, id_len, "host:%s/%s", host, boot);
    snprintf(name, name_len, "%s", host);
}
