/* dtoa.h — the shortest decimal text of a double that reads back to the same
 * double. Used by the JSON writer and by CEL's string(double).
 *
 * The format is exactly Go's strconv.FormatFloat(d, 'g', -1, 64), which is
 * what CEL implementations print for string(double):
 *   - digits: the fewest that read back to d; among several candidates of
 *     that length, the one nearest to d;
 *   - layout: with x the decimal exponent of the first digit
 *     (d = D.DDD × 10^x), exponent form when x < -4 or x >= 6, plain
 *     notation otherwise (no trailing ".0", no trailing zeros);
 *   - the exponent carries a sign and at least two digits;
 *   - zero is "0" or "-0"; NaN is "NaN"; the infinities are "+Inf", "-Inf".
 *
 *   0.1 → "0.1"            0.1+0.2 → "0.30000000000000004"
 *   100 → "100"            123456 → "123456"       1234567 → "1.234567e+06"
 *   -4.5e-3 → "-0.0045"    1e-05 → "1e-05"         1e-7 → "1e-07"
 *   1e21 → "1e+21"         5e-324 → "5e-324"
 *   1.7976931348623157e308 → "1.7976931348623157e+308"
 *
 * Every finite result is also a valid JSON number. The output never depends
 * on the C locale. */
#ifndef VD_CORE_DTOA_H
#define VD_CORE_DTOA_H

#include <stddef.h>

/* Writes the text of d into out, NUL-terminated, and returns its length
 * (at most 24). */
size_t dtoa_shortest(double d, char out[32]);

/* The same for a float32: the fewest digits that read back (with strtof, or
 * strtod then a cast to float) to f, in the same layout. 0.1f → "0.1", where
 * dtoa_shortest((double)0.1f) gives "0.10000000149011612". */
size_t ftoa_shortest(float f, char out[32]);
/* The double nearest to the decimal ftoa_shortest writes for f: f as people
 * read it (0.9f → 0.9, not 0.8999999761581421). Casting it back to float
 * gives f. */
double float_decimal(float f);

#endif
