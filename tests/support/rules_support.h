/*
 * rules_support.h - shared helpers for tests that need rules: parse a YAML
 * text that must be valid (printing every problem when it is not).
 */
#ifndef WEIR_TEST_RULES_SUPPORT_H
#define WEIR_TEST_RULES_SUPPORT_H

#include "weir/weir.h"

/* weir_rules_parse() of @yaml as "test.yaml", asserting WEIR_OK. */
weir_rules *test_rules_parse(weir_ctx *ctx, const char *yaml);

#endif /* WEIR_TEST_RULES_SUPPORT_H */
