/*
 * oci: husk's OCI runtime, with runc's command line (oci.c). `husk oci
 * ARGS` and a binary named husk-runc both land here.
 */
#ifndef HUSK_OCI_H
#define HUSK_OCI_H

/* argv[0] is "oci" (or the runtime's own name); returns the exit status. */
int oci_main(int argc, char **argv);

#endif
