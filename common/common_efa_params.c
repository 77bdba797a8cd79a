/*
 * Registration and checks of the components' parameter tables
 * (common_efa_params.h).  Runs at registration and init only.
 */
#include "common_efa_params.h"

#include <stdio.h>
#include <string.h>

#include "common_efa.h"
#include "opal/constants.h"

/* A number parameter's value, as a signed or (size_t) unsigned number. */
static bool number_of(const mca_common_efa_param_t *p, long long *s, unsigned long long *u) {
    switch (p->type) {
    case MCA_BASE_VAR_TYPE_INT:
        *s = *(const int *)p->storage;
        return true;
    case MCA_BASE_VAR_TYPE_SIZE_T:
        *u = *(const size_t *)p->storage;
        return false;
    case MCA_BASE_VAR_TYPE_BOOL:
        *s = *(const bool *)p->storage;
        return true;
    default:
        *s = 0;
        return true;
    }
}

static void set_default(const mca_common_efa_param_t *p) {
    switch (p->type) {
    case MCA_BASE_VAR_TYPE_INT:
        *(int *)p->storage = (int)p->def;
        break;
    case MCA_BASE_VAR_TYPE_SIZE_T:
        *(size_t *)p->storage = (size_t)p->def;
        break;
    case MCA_BASE_VAR_TYPE_BOOL:
        *(bool *)p->storage = 0 != p->def;
        break;
    case MCA_BASE_VAR_TYPE_STRING:
        /* Registration replaces it by a copy of its own. */
        *(char **)p->storage = (char *)(p->def_str ? p->def_str : "");
        break;
    default:
        break;
    }
}

static bool at_default(const mca_common_efa_param_t *p) {
    if (MCA_BASE_VAR_TYPE_STRING == p->type) {
        const char *v = *(char *const *)p->storage;
        const char *d = p->def_str ? p->def_str : "";
        return 0 == strcmp(v ? v : "", d);
    }
    long long s = 0;
    unsigned long long u = 0;
    return number_of(p, &s, &u) ? s == p->def : u == (unsigned long long)p->def;
}

bool mca_common_efa_params_register(const mca_base_component_t *component,
                                    const mca_common_efa_param_t *table, size_t n, int *idx) {
    bool hooks = false;
    for (size_t i = 0; i < n; ++i) {
        const mca_common_efa_param_t *p = &table[i];
        set_default(p);
        const mca_base_var_info_lvl_t level = p->test_only ? OPAL_INFO_LVL_9 : p->level;
        int rc =
            NULL != component
                ? mca_base_component_var_register(component, p->name, p->help, p->type, NULL, 0, 0,
                                                  level, MCA_BASE_VAR_SCOPE_READONLY, p->storage)
                : mca_base_var_register("opal", "common", "efa", p->name, p->help, p->type, NULL, 0,
                                        0, level, MCA_BASE_VAR_SCOPE_READONLY, p->storage);
        if (NULL != idx) {
            idx[i] = rc;
        }
        hooks = hooks || (p->test_only && !at_default(p));
    }
    return hooks;
}

/* Is p's value allowed?  Its text into value. */
static bool allowed(const mca_common_efa_param_t *p, char *value, size_t len) {
    if (MCA_BASE_VAR_TYPE_STRING == p->type) {
        const char *v = *(char *const *)p->storage;
        snprintf(value, len, "%s", v ? v : ""); /* (Open MPI keeps "" as NULL) */
        if (p->unset_is_default && (NULL == v || '\0' == v[0])) {
            return true; /* its reader takes it as the default */
        }
        for (const char *const *c = p->choices; NULL != c && NULL != *c; ++c) {
            if (NULL != v && 0 == strcmp(v, *c)) {
                return true;
            }
        }
        return NULL == p->choices;
    }
    long long s = 0;
    unsigned long long u = 0;
    if (number_of(p, &s, &u)) {
        snprintf(value, len, "%lld", s);
        return (p->zero_ok && 0 == s) || (s >= p->lo && s <= p->hi);
    }
    snprintf(value, len, "%llu", u);
    return (p->zero_ok && 0 == u) ||
           (u >= (unsigned long long)p->lo &&
            (MCA_COMMON_EFA_NO_MAX == p->hi || u <= (unsigned long long)p->hi));
}

int mca_common_efa_params_check(const mca_common_efa_param_t *table, size_t n,
                                const char *help_file) {
    char value[256];
    for (size_t i = 0; i < n; ++i) {
        const mca_common_efa_param_t *p = &table[i];
        if (NULL != p->allowed && !allowed(p, value, sizeof(value))) {
            mca_common_efa_show_help(help_file, p->topic, true, opal_process_info.nodename, p->name,
                                     value, p->allowed);
            return OPAL_ERR_BAD_PARAM;
        }
    }
    return OPAL_SUCCESS;
}

bool mca_common_efa_explicitly_requested(const char *project, const char *framework) {
    const char **value = NULL;
    int idx = mca_base_var_find(project, framework, NULL, NULL);
    if (idx < 0 || OPAL_SUCCESS != mca_base_var_get_value(idx, &value, NULL, NULL) ||
        NULL == value || NULL == *value) {
        return false;
    }
    return (*value)[0] != '^' && NULL != strstr(*value, "efa");
}

/* Is the string parameter PROJECT_FRAMEWORK_efa_NAME of a loaded component
 * 'want'?  Unregistered (component not loaded): no. */
bool mca_common_efa_string_var_is(const char *project, const char *framework, const char *name,
                                  const char *want) {
    const char **value = NULL;
    int idx = mca_base_var_find(project, framework, "efa", name);
    if (idx < 0 || OPAL_SUCCESS != mca_base_var_get_value(idx, &value, NULL, NULL) ||
        NULL == value || NULL == *value) {
        return false;
    }
    return 0 == strcmp(*value, want);
}
