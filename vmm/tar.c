/* tar: placeholder until implemented. */
