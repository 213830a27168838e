/* run: placeholder. */
#ifndef HUSK_RUN_H
#define HUSK_RUN_H
#endif
