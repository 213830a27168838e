/* proto: placeholder until implemented. */
