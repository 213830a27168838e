/*
 * uart: register model of a 16550A-compatible UART (the PC's COM1).
 *
 * Pure state machine: the owner feeds register reads/writes from port I/O
 * exits and received bytes from the host, and gets transmitted bytes and
 * interrupt-line changes through callbacks. Transmission is instantaneous,
 * so the transmitter is always empty; the THRE interrupt is still modelled
 * exactly, because Linux's 8250 driver only sends userspace output when it
 * sees that interrupt. Not thread-safe: the owner serialises access.
 */
#ifndef HUSK_UART_H
#define HUSK_UART_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define UART_FIFO_SIZE 64

/* Register offsets. */
enum {
	UART_RBR_THR = 0, UART_IER = 1, UART_IIR_FCR = 2, UART_LCR = 3,
	UART_MCR = 4, UART_LSR = 5, UART_MSR = 6, UART_SCR = 7,
};
/* Register bits. */
#define UART_IER_RDI	0x01	/* received data available */
#define UART_IER_THRI	0x02	/* transmitter holding register empty */
#define UART_IER_RLSI	0x04	/* receiver line status */
#define UART_IER_MSI	0x08	/* modem status */
#define UART_IIR_NO_INT	0x01
#define UART_IIR_MSI	0x00
#define UART_IIR_THRI	0x02
#define UART_IIR_RDI	0x04
#define UART_IIR_RLSI	0x06
#define UART_IIR_FIFO	0xc0
#define UART_FCR_ENABLE	0x01
#define UART_FCR_CLEAR_RCVR 0x02
#define UART_LCR_DLAB	0x80
#define UART_MCR_LOOP	0x10
#define UART_LSR_DR	0x01
#define UART_LSR_OE	0x02
#define UART_LSR_THRE	0x20
#define UART_LSR_TEMT	0x40

struct uart {
	uint8_t ier, lcr, mcr, lsr_err, scr, dll, dlm;
	bool fifo_on;
	bool thri_pending;	/* THRE interrupt latched, cleared by IIR read/THR write */
	bool irq_level;
	uint8_t rx[UART_FIFO_SIZE];
	unsigned rx_head, rx_count;
	void (*tx)(void *opaque, uint8_t byte);
	void (*irq)(void *opaque, int level);
	void *opaque;
};

void uart_init(struct uart *u, void (*tx)(void *, uint8_t),
	       void (*irq)(void *, int), void *opaque);
uint8_t uart_read(struct uart *u, unsigned off);
void uart_write(struct uart *u, unsigned off, uint8_t val);
/* Queue received bytes; returns how many fit in the receive FIFO. */
size_t uart_receive(struct uart *u, const uint8_t *buf, size_t len);
size_t uart_rx_room(const struct uart *u);

/*
 * Templates: the registers, the latched THRE interrupt and the receive FIFO
 * as fixed bytes; restore re-drives the interrupt line from that state.
 */
#define UART_STATE_LEN (8 + UART_FIFO_SIZE + 2)
void uart_save(const struct uart *u, uint8_t out[UART_STATE_LEN]);
int uart_restore(struct uart *u, const uint8_t in[UART_STATE_LEN]);

#endif
