/*
 * json: write JSON result records. Strings may carry guest-controlled text
 * (panic lines), so everything is escaped; control bytes become \u00XX.
 */
#ifndef HUSK_JSON_H
#define HUSK_JSON_H

#include <stdint.h>
#include <stdio.h>

/* Write s as a quoted, escaped JSON string. */
void json_put_string(FILE *f, const char *s);

#endif
