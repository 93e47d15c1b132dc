/*
 * rules_support.h - shared helpers for tests that need rules: parse a YAML
 * text that must be valid (printing every problem when it is not).
 */
#ifndef WEIR_TEST_RULES_SUPPORT_H
#define WEIR_TEST_RULES_SUPPORT_H

#include "weir/weir.h"

/* weir_rules_parse() of @yaml as "test.yaml", asserting WEIR_OK. */
weir_rules *test_rules_parse(weir_ctx *ctx, const char *yaml);

/* Asserts that @yaml is refused with a problem whose message holds @want. */
void test_rules_expect_error(const char *yaml, const char *want);

#endif /* WEIR_TEST_RULES_SUPPORT_H */
