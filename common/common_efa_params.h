/*
 * MCA parameters as tables: each component (common, mtl_efa, btl_efa)
 * lists its parameters once, one entry each, and registration, defaults,
 * the check of the values and the common ones' synonyms are made from the
 * table (common_efa_params.c).
 */
#ifndef MCA_COMMON_EFA_PARAMS_H
#define MCA_COMMON_EFA_PARAMS_H

#include "opal_config.h"

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "opal/mca/base/base.h"
#include "opal/mca/base/mca_base_var.h"

BEGIN_C_DECLS

/* No upper bound for a number (its type's own). */
#define MCA_COMMON_EFA_NO_MAX LLONG_MAX

/* One parameter.  Checked where 'allowed' is set: a number must lie in
 * lo..hi (or be 0 where zero_ok), a string be one of 'choices'; a refusal
 * shows 'topic' of the component's help file with the host, the name,
 * the value and 'allowed'.  A test-only one is a hook that tests use to
 * provoke failures: registered at level 9, its help begins "Testing only:"
 * (docs/RELIABILITY.md, "Test-only parameters"). */
typedef struct mca_common_efa_param {
    const char *name;
    mca_base_var_type_t type; /* INT, BOOL, SIZE_T or STRING */
    void *storage;            /* int, bool, size_t or char * */
    long long def;            /* default of a number or a bool */
    const char *def_str;      /* default of a string */
    long long lo, hi;
    bool zero_ok;
    const char *const *choices; /* NULL-terminated */
    bool unset_is_default;      /* a string left unset (NULL) or "" means def_str */
    const char *allowed;
    const char *topic;
    mca_base_var_info_lvl_t level;
    bool test_only;
    const char *help;
} mca_common_efa_param_t;

/* Set each parameter's default and register it as the component's
 * (deregistered with it), or as common_efa_* where component is NULL
 * (idx[i]: its index, where idx is not NULL).  Returns whether a
 * test-only parameter was set away from its default. */
OPAL_DECLSPEC bool mca_common_efa_params_register(const mca_base_component_t *component,
                                                  const mca_common_efa_param_t *table, size_t n,
                                                  int *idx);

/* Check the values in table order: the first refused is reported from
 * help_file (same in every process) and OPAL_ERR_BAD_PARAM returned. */
OPAL_DECLSPEC int mca_common_efa_params_check(const mca_common_efa_param_t *table, size_t n,
                                              const char *help_file);

/* Is the string parameter PROJECT_FRAMEWORK_efa_NAME of a loaded component
 * 'want'?  Unregistered (component not loaded): no. */
bool mca_common_efa_string_var_is(const char *project, const char *framework, const char *name,
                                  const char *want);

END_C_DECLS
#endif
