/*
 * uart: register model of a 16550A-compatible UART. See uart.h.
 */
#include <errno.h>
#include <string.h>

#include "machine/uart.h"

static uint8_t pending_iir(const struct uart *u)
{
	if ((u->ier & UART_IER_RLSI) && u->lsr_err)
		return UART_IIR_RLSI;
	if ((u->ier & UART_IER_RDI) && u->rx_count)
		return UART_IIR_RDI;
	if ((u->ier & UART_IER_THRI) && u->thri_pending)
		return UART_IIR_THRI;
	return UART_IIR_NO_INT;
}

/* Drive the line from the state; edges are what an edge-triggered pin sees. */
static void update_irq(struct uart *u)
{
	bool level = pending_iir(u) != UART_IIR_NO_INT;

	if (level != u->irq_level) {
		u->irq_level = level;
		if (u->irq)
			u->irq(u->opaque, level);
	}
}

void uart_init(struct uart *u, void (*tx)(void *, uint8_t),
	       void (*irq)(void *, int), void *opaque)
{
	memset(u, 0, sizeof(*u));
	u->tx = tx;
	u->irq = irq;
	u->opaque = opaque;
	u->mcr = 0x08;		/* OUT2: interrupts routed to the PIC */
}

static void rx_push(struct uart *u, uint8_t b)
{
	if (u->rx_count == UART_FIFO_SIZE) {
		u->lsr_err |= UART_LSR_OE;
		return;
	}
	u->rx[(u->rx_head + u->rx_count) % UART_FIFO_SIZE] = b;
	u->rx_count++;
}

static uint8_t rx_pop(struct uart *u)
{
	uint8_t b;

	if (!u->rx_count)
		return 0;
	b = u->rx[u->rx_head];
	u->rx_head = (u->rx_head + 1) % UART_FIFO_SIZE;
	u->rx_count--;
	return b;
}

static uint8_t read_msr(const struct uart *u)
{
	uint8_t m = u->mcr;

	if (!(u->mcr & UART_MCR_LOOP))
		return 0xb0;	/* DCD, DSR, CTS: a connected terminal */
	/* Loopback feeds the modem outputs back: RTS->CTS, DTR->DSR, OUT1->RI, OUT2->DCD. */
	return ((m & 0x02) << 3) | ((m & 0x01) << 5) | ((m & 0x04) << 4) | ((m & 0x08) << 4);
}

uint8_t uart_read(struct uart *u, unsigned off)
{
	uint8_t v = 0;

	switch (off) {
	case UART_RBR_THR:
		v = (u->lcr & UART_LCR_DLAB) ? u->dll : rx_pop(u);
		break;
	case UART_IER:
		v = (u->lcr & UART_LCR_DLAB) ? u->dlm : u->ier;
		break;
	case UART_IIR_FCR:
		v = pending_iir(u);
		/* Reading IIR acknowledges a THRE interrupt it reports. */
		if (v == UART_IIR_THRI)
			u->thri_pending = false;
		if (u->fifo_on)
			v |= UART_IIR_FIFO;
		break;
	case UART_LCR:
		v = u->lcr;
		break;
	case UART_MCR:
		v = u->mcr;
		break;
	case UART_LSR:
		v = UART_LSR_THRE | UART_LSR_TEMT | u->lsr_err;
		if (u->rx_count)
			v |= UART_LSR_DR;
		u->lsr_err = 0;
		break;
	case UART_MSR:
		v = read_msr(u);
		break;
	case UART_SCR:
		v = u->scr;
		break;
	default:
		v = 0xff;
	}
	update_irq(u);
	return v;
}

void uart_write(struct uart *u, unsigned off, uint8_t val)
{
	switch (off) {
	case UART_RBR_THR:
		if (u->lcr & UART_LCR_DLAB) {
			u->dll = val;
			break;
		}
		if (u->mcr & UART_MCR_LOOP)
			rx_push(u, val);
		else if (u->tx)
			u->tx(u->opaque, val);
		/* The byte left at once: the holding register is empty again. */
		u->thri_pending = true;
		break;
	case UART_IER:
		if (u->lcr & UART_LCR_DLAB) {
			u->dlm = val;
			break;
		}
		/* Enabling THRI while the transmitter is empty raises it at once. */
		if ((val & UART_IER_THRI) && !(u->ier & UART_IER_THRI))
			u->thri_pending = true;
		u->ier = val & 0x0f;
		break;
	case UART_IIR_FCR:
		u->fifo_on = val & UART_FCR_ENABLE;
		if (val & UART_FCR_CLEAR_RCVR)
			u->rx_head = u->rx_count = 0;
		break;
	case UART_LCR:
		u->lcr = val;
		break;
	case UART_MCR:
		u->mcr = val & 0x1f;
		break;
	case UART_SCR:
		u->scr = val;
		break;
	default:
		break;		/* LSR and MSR are read-only */
	}
	update_irq(u);
}

size_t uart_rx_room(const struct uart *u)
{
	return UART_FIFO_SIZE - u->rx_count;
}

size_t uart_receive(struct uart *u, const uint8_t *buf, size_t len)
{
	size_t n = 0;

	while (n < len && u->rx_count < UART_FIFO_SIZE)
		rx_push(u, buf[n++]);
	update_irq(u);
	return n;
}

void uart_save(const struct uart *u, uint8_t out[UART_STATE_LEN])
{
	unsigned i;

	out[0] = u->ier;
	out[1] = u->lcr;
	out[2] = u->mcr;
	out[3] = u->lsr_err;
	out[4] = u->scr;
	out[5] = u->dll;
	out[6] = u->dlm;
	out[7] = u->fifo_on | u->thri_pending << 1;
	/* The FIFO in order, from its head. */
	for (i = 0; i < UART_FIFO_SIZE; i++)
		out[8 + i] = i < u->rx_count ? u->rx[(u->rx_head + i) % UART_FIFO_SIZE] : 0;
	out[8 + UART_FIFO_SIZE] = (uint8_t)u->rx_count;
	out[9 + UART_FIFO_SIZE] = 0;
}

int uart_restore(struct uart *u, const uint8_t in[UART_STATE_LEN])
{
	unsigned count = in[8 + UART_FIFO_SIZE];

	if (count > UART_FIFO_SIZE || (in[7] & ~3u))
		return -EINVAL;
	u->ier = in[0] & 0x0f;
	u->lcr = in[1];
	u->mcr = in[2];
	u->lsr_err = in[3];
	u->scr = in[4];
	u->dll = in[5];
	u->dlm = in[6];
	u->fifo_on = in[7] & 1;
	u->thri_pending = in[7] >> 1 & 1;
	memcpy(u->rx, in + 8, UART_FIFO_SIZE);
	u->rx_head = 0;
	u->rx_count = count;
	/* The line as this state drives it; the first update edges it up. */
	u->irq_level = false;
	update_irq(u);
	return 0;
}
