/* vsock_conn: placeholder until implemented. */
