/* run: placeholder until implemented. */
