/* vsock_conn: placeholder. */
#ifndef HUSK_VSOCK_CONN_H
#define HUSK_VSOCK_CONN_H
#endif
