/*
 * Unit tests for uart: the 16550A register model driven through
 * uart_read()/uart_write() with recording tx and irq callbacks. Covers
 * transmit, LSR, divisor latches, the THRE interrupt as Linux's 8250 driver
 * relies on it (raise on enable, acknowledge by IIR read, re-raise on THR
 * write), receive FIFO order, capacity and overrun, FCR, loopback and MSR,
 * scratch register, and that the irq callback only sees level changes.
 */
#include <stdint.h>
#include <errno.h>
#include <string.h>

#include "machine/uart.h"
#include "suites.h"

struct rec {
	uint8_t tx[256];
	unsigned ntx;
	int levels[64];
	unsigned nirq;
};

static struct uart u;
static struct rec r;

static void rec_tx(void *opaque, uint8_t b)
{
	struct rec *p = opaque;

	ck_assert_uint_lt(p->ntx, sizeof(p->tx));
	p->tx[p->ntx++] = b;
}

static void rec_irq(void *opaque, int level)
{
	struct rec *p = opaque;

	ck_assert_uint_lt(p->nirq, 64);
	p->levels[p->nirq++] = level;
}

static void setup(void)
{
	memset(&r, 0, sizeof(r));
	uart_init(&u, rec_tx, rec_irq, &r);
}

static int rises(void)
{
	unsigned i;
	int n = 0;

	for (i = 0; i < r.nirq; i++)
		n += r.levels[i] == 1;
	return n;
}

START_TEST(reset_state)
{
	ck_assert_uint_eq(uart_read(&u, UART_IER), 0);
	ck_assert_uint_eq(uart_read(&u, UART_IIR_FCR), UART_IIR_NO_INT);
	ck_assert_uint_eq(uart_read(&u, UART_LCR), 0);
	ck_assert_uint_eq(uart_read(&u, UART_MCR), 0x08);	/* OUT2 */
	ck_assert_uint_eq(uart_read(&u, UART_LSR), UART_LSR_THRE | UART_LSR_TEMT);
	ck_assert_uint_eq(uart_read(&u, UART_MSR), 0xb0);	/* DCD, DSR, CTS */
	ck_assert_uint_eq(uart_rx_room(&u), UART_FIFO_SIZE);
	ck_assert_uint_eq(r.nirq, 0);
	ck_assert_uint_eq(r.ntx, 0);
}
END_TEST

START_TEST(thr_write_transmits)
{
	const char *msg = "Linux version";
	unsigned i;

	for (i = 0; msg[i]; i++)
		uart_write(&u, UART_RBR_THR, (uint8_t)msg[i]);
	ck_assert_uint_eq(r.ntx, strlen(msg));
	ck_assert_mem_eq(r.tx, msg, strlen(msg));
	uart_write(&u, UART_RBR_THR, 0x00);
	uart_write(&u, UART_RBR_THR, 0xff);
	ck_assert_uint_eq(r.tx[r.ntx - 2], 0x00);
	ck_assert_uint_eq(r.tx[r.ntx - 1], 0xff);
	/* No interrupt without IER. */
	ck_assert_uint_eq(r.nirq, 0);
}
END_TEST

START_TEST(lsr_always_transmitter_empty)
{
	unsigned i;

	for (i = 0; i < 100; i++) {
		uart_write(&u, UART_RBR_THR, 'x');
		ck_assert_uint_eq(uart_read(&u, UART_LSR) & (UART_LSR_THRE | UART_LSR_TEMT),
				  UART_LSR_THRE | UART_LSR_TEMT);
	}
}
END_TEST

START_TEST(no_callbacks_is_safe)
{
	struct uart v;

	uart_init(&v, NULL, NULL, NULL);
	uart_write(&v, UART_IER, UART_IER_THRI);
	uart_write(&v, UART_RBR_THR, 'a');
	ck_assert_uint_eq(uart_read(&v, UART_IIR_FCR), UART_IIR_THRI);
	ck_assert_uint_eq(uart_receive(&v, (const uint8_t *)"b", 1), 1);
	ck_assert_uint_eq(uart_read(&v, UART_RBR_THR), 'b');
}
END_TEST

START_TEST(dlab_divisor_latches)
{
	uart_write(&u, UART_IER, UART_IER_RDI);
	uart_write(&u, UART_LCR, UART_LCR_DLAB | 0x03);
	uart_write(&u, UART_RBR_THR, 0x0c);	/* 9600 baud */
	uart_write(&u, UART_IER, 0x00);
	ck_assert_uint_eq(uart_read(&u, UART_RBR_THR), 0x0c);
	ck_assert_uint_eq(uart_read(&u, UART_IER), 0x00);
	uart_write(&u, UART_IER, 0x5a);
	ck_assert_uint_eq(uart_read(&u, UART_IER), 0x5a);
	ck_assert_uint_eq(uart_read(&u, UART_LCR), UART_LCR_DLAB | 0x03);
	/* The latch writes neither transmitted nor changed IER. */
	ck_assert_uint_eq(r.ntx, 0);
	uart_write(&u, UART_LCR, 0x03);
	ck_assert_uint_eq(uart_read(&u, UART_IER), UART_IER_RDI);
	ck_assert_uint_eq(uart_read(&u, UART_LCR), 0x03);
	/* With DLAB clear, offset 0 is the data register again. */
	uart_write(&u, UART_RBR_THR, 'k');
	ck_assert_uint_eq(r.ntx, 1);
	ck_assert_uint_eq(r.tx[0], 'k');
	/* The latches kept their values. */
	uart_write(&u, UART_LCR, UART_LCR_DLAB);
	ck_assert_uint_eq(uart_read(&u, UART_RBR_THR), 0x0c);
	ck_assert_uint_eq(uart_read(&u, UART_IER), 0x5a);
}
END_TEST

START_TEST(dlab_read_does_not_pop_fifo)
{
	ck_assert_uint_eq(uart_receive(&u, (const uint8_t *)"Q", 1), 1);
	uart_write(&u, UART_LCR, UART_LCR_DLAB);
	uart_read(&u, UART_RBR_THR);
	uart_write(&u, UART_LCR, 0);
	ck_assert_uint_eq(uart_read(&u, UART_LSR) & UART_LSR_DR, UART_LSR_DR);
	ck_assert_uint_eq(uart_read(&u, UART_RBR_THR), 'Q');
}
END_TEST

START_TEST(ier_masks_reserved_bits)
{
	uart_write(&u, UART_IER, 0xf1);
	ck_assert_uint_eq(uart_read(&u, UART_IER), 0x01);
}
END_TEST

START_TEST(thri_raised_on_enable_and_acked_by_iir)
{
	uart_write(&u, UART_IER, UART_IER_THRI);
	ck_assert_uint_eq(r.nirq, 1);
	ck_assert_int_eq(r.levels[0], 1);
	ck_assert_uint_eq(uart_read(&u, UART_IIR_FCR), UART_IIR_THRI);
	/* The read acknowledged it: the line drops, IIR says nothing pending. */
	ck_assert_uint_eq(r.nirq, 2);
	ck_assert_int_eq(r.levels[1], 0);
	ck_assert_uint_eq(uart_read(&u, UART_IIR_FCR), UART_IIR_NO_INT);
	ck_assert_uint_eq(r.nirq, 2);
}
END_TEST

START_TEST(thri_reraised_by_thr_write)
{
	uart_write(&u, UART_IER, UART_IER_THRI);
	uart_read(&u, UART_IIR_FCR);
	ck_assert_int_eq(rises(), 1);
	uart_write(&u, UART_RBR_THR, 'a');
	ck_assert_int_eq(rises(), 2);
	ck_assert_int_eq(r.levels[r.nirq - 1], 1);
	ck_assert_uint_eq(r.ntx, 1);
	ck_assert_uint_eq(uart_read(&u, UART_IIR_FCR), UART_IIR_THRI);
	ck_assert_int_eq(r.levels[r.nirq - 1], 0);
	uart_write(&u, UART_RBR_THR, 'b');
	ck_assert_int_eq(rises(), 3);
}
END_TEST

START_TEST(thri_not_rewritten_if_already_enabled)
{
	/* Rewriting IER with THRI still set does not re-latch the interrupt. */
	uart_write(&u, UART_IER, UART_IER_THRI);
	uart_read(&u, UART_IIR_FCR);
	uart_write(&u, UART_IER, UART_IER_THRI | UART_IER_RDI);
	ck_assert_uint_eq(uart_read(&u, UART_IIR_FCR), UART_IIR_NO_INT);
	ck_assert_int_eq(rises(), 1);
	/* Disable and enable again: raised again. */
	uart_write(&u, UART_IER, 0);
	uart_write(&u, UART_IER, UART_IER_THRI);
	ck_assert_int_eq(rises(), 2);
}
END_TEST

START_TEST(thri_masked_by_ier)
{
	uart_write(&u, UART_IER, UART_IER_THRI);
	ck_assert_int_eq(r.levels[r.nirq - 1], 1);
	uart_write(&u, UART_IER, 0);
	ck_assert_int_eq(r.levels[r.nirq - 1], 0);
	ck_assert_uint_eq(uart_read(&u, UART_IIR_FCR), UART_IIR_NO_INT);
	uart_write(&u, UART_RBR_THR, 'z');
	ck_assert_uint_eq(r.nirq, 2);
}
END_TEST

START_TEST(receive_sets_dr_and_rdi)
{
	ck_assert_uint_eq(uart_receive(&u, (const uint8_t *)"hi", 2), 2);
	ck_assert_uint_eq(uart_read(&u, UART_LSR), UART_LSR_THRE | UART_LSR_TEMT | UART_LSR_DR);
	/* RDI not enabled: no interrupt yet. */
	ck_assert_uint_eq(r.nirq, 0);
	ck_assert_uint_eq(uart_read(&u, UART_IIR_FCR), UART_IIR_NO_INT);
	uart_write(&u, UART_IER, UART_IER_RDI);
	ck_assert_uint_eq(r.nirq, 1);
	ck_assert_int_eq(r.levels[0], 1);
	ck_assert_uint_eq(uart_read(&u, UART_IIR_FCR), UART_IIR_RDI);
	/* Reading IIR does not acknowledge received data. */
	ck_assert_uint_eq(uart_read(&u, UART_IIR_FCR), UART_IIR_RDI);
	ck_assert_uint_eq(uart_read(&u, UART_RBR_THR), 'h');
	ck_assert_uint_eq(r.nirq, 1);
	ck_assert_uint_eq(uart_read(&u, UART_RBR_THR), 'i');
	ck_assert_uint_eq(r.nirq, 2);
	ck_assert_int_eq(r.levels[1], 0);
	ck_assert_uint_eq(uart_read(&u, UART_LSR) & UART_LSR_DR, 0);
	ck_assert_uint_eq(uart_read(&u, UART_IIR_FCR), UART_IIR_NO_INT);
}
END_TEST

START_TEST(receive_with_rdi_enabled_raises)
{
	uart_write(&u, UART_IER, UART_IER_RDI);
	ck_assert_uint_eq(r.nirq, 0);
	ck_assert_uint_eq(uart_receive(&u, (const uint8_t *)"x", 1), 1);
	ck_assert_uint_eq(r.nirq, 1);
	ck_assert_int_eq(r.levels[0], 1);
	/* More data while the line is up: no new edge. */
	ck_assert_uint_eq(uart_receive(&u, (const uint8_t *)"y", 1), 1);
	ck_assert_uint_eq(r.nirq, 1);
}
END_TEST

START_TEST(rdi_has_priority_over_thri)
{
	uart_write(&u, UART_IER, UART_IER_RDI | UART_IER_THRI);
	uart_receive(&u, (const uint8_t *)"a", 1);
	ck_assert_uint_eq(uart_read(&u, UART_IIR_FCR), UART_IIR_RDI);
	uart_read(&u, UART_RBR_THR);
	/* The THRE interrupt was not lost behind the data interrupt. */
	ck_assert_uint_eq(uart_read(&u, UART_IIR_FCR), UART_IIR_THRI);
	ck_assert_uint_eq(uart_read(&u, UART_IIR_FCR), UART_IIR_NO_INT);
	ck_assert_int_eq(r.levels[r.nirq - 1], 0);
}
END_TEST

START_TEST(rbr_pops_in_order)
{
	uint8_t in[UART_FIFO_SIZE];
	unsigned i;

	for (i = 0; i < sizeof(in); i++)
		in[i] = (uint8_t)(i * 5 + 1);
	ck_assert_uint_eq(uart_receive(&u, in, 10), 10);
	ck_assert_uint_eq(uart_rx_room(&u), UART_FIFO_SIZE - 10);
	for (i = 0; i < 5; i++)
		ck_assert_uint_eq(uart_read(&u, UART_RBR_THR), in[i]);
	/* Wrap around the ring. */
	ck_assert_uint_eq(uart_receive(&u, in + 10, UART_FIFO_SIZE - 10), UART_FIFO_SIZE - 10);
	ck_assert_uint_eq(uart_rx_room(&u), 5);
	for (i = 5; i < UART_FIFO_SIZE; i++)
		ck_assert_uint_eq(uart_read(&u, UART_RBR_THR), in[i]);
	ck_assert_uint_eq(uart_rx_room(&u), UART_FIFO_SIZE);
	/* An empty FIFO reads as 0. */
	ck_assert_uint_eq(uart_read(&u, UART_RBR_THR), 0);
}
END_TEST

START_TEST(fifo_capacity)
{
	uint8_t in[100];
	unsigned i;

	for (i = 0; i < sizeof(in); i++)
		in[i] = (uint8_t)i;
	ck_assert_uint_eq(uart_receive(&u, in, sizeof(in)), UART_FIFO_SIZE);
	ck_assert_uint_eq(uart_rx_room(&u), 0);
	ck_assert_uint_eq(uart_receive(&u, in, 1), 0);
	/* uart_receive() refuses what does not fit instead of overrunning. */
	ck_assert_uint_eq(uart_read(&u, UART_LSR) & UART_LSR_OE, 0);
	for (i = 0; i < UART_FIFO_SIZE; i++)
		ck_assert_uint_eq(uart_read(&u, UART_RBR_THR), i);
	ck_assert_uint_eq(uart_read(&u, UART_LSR) & UART_LSR_DR, 0);
	ck_assert_uint_eq(uart_receive(&u, in, 0), 0);
}
END_TEST

START_TEST(loopback_overrun_sets_oe)
{
	unsigned i;

	uart_write(&u, UART_MCR, UART_MCR_LOOP);
	for (i = 0; i < UART_FIFO_SIZE; i++)
		uart_write(&u, UART_RBR_THR, (uint8_t)(0x80 + i));
	ck_assert_uint_eq(uart_rx_room(&u), 0);
	ck_assert_uint_eq(uart_read(&u, UART_LSR) & UART_LSR_OE, 0);
	uart_write(&u, UART_RBR_THR, 0x11);	/* one too many: lost */
	ck_assert_uint_eq(uart_read(&u, UART_LSR),
			  UART_LSR_THRE | UART_LSR_TEMT | UART_LSR_DR | UART_LSR_OE);
	/* Reading LSR cleared the error. */
	ck_assert_uint_eq(uart_read(&u, UART_LSR) & UART_LSR_OE, 0);
	for (i = 0; i < UART_FIFO_SIZE; i++)
		ck_assert_uint_eq(uart_read(&u, UART_RBR_THR), 0x80 + i);
	ck_assert_uint_eq(uart_read(&u, UART_LSR) & UART_LSR_DR, 0);
	ck_assert_uint_eq(r.ntx, 0);
}
END_TEST

START_TEST(overrun_raises_rlsi)
{
	unsigned i;

	uart_write(&u, UART_MCR, UART_MCR_LOOP);
	uart_write(&u, UART_IER, UART_IER_RLSI);
	for (i = 0; i <= UART_FIFO_SIZE; i++)
		uart_write(&u, UART_RBR_THR, 'o');
	ck_assert_uint_eq(uart_read(&u, UART_IIR_FCR), UART_IIR_RLSI);
	ck_assert_int_eq(r.levels[r.nirq - 1], 1);
	uart_read(&u, UART_LSR);
	ck_assert_int_eq(r.levels[r.nirq - 1], 0);
	ck_assert_uint_eq(uart_read(&u, UART_IIR_FCR), UART_IIR_NO_INT);
}
END_TEST

START_TEST(fcr_enable_and_clear)
{
	ck_assert_uint_eq(uart_read(&u, UART_IIR_FCR) & UART_IIR_FIFO, 0);
	uart_write(&u, UART_IIR_FCR, UART_FCR_ENABLE);
	ck_assert_uint_eq(uart_read(&u, UART_IIR_FCR), UART_IIR_FIFO | UART_IIR_NO_INT);
	uart_write(&u, UART_IER, UART_IER_THRI);
	ck_assert_uint_eq(uart_read(&u, UART_IIR_FCR), UART_IIR_FIFO | UART_IIR_THRI);

	ck_assert_uint_eq(uart_receive(&u, (const uint8_t *)"abc", 3), 3);
	uart_write(&u, UART_IIR_FCR, UART_FCR_ENABLE | UART_FCR_CLEAR_RCVR);
	ck_assert_uint_eq(uart_rx_room(&u), UART_FIFO_SIZE);
	ck_assert_uint_eq(uart_read(&u, UART_LSR) & UART_LSR_DR, 0);
	ck_assert_uint_eq(uart_read(&u, UART_RBR_THR), 0);
	ck_assert_uint_eq(uart_read(&u, UART_IIR_FCR) & UART_IIR_FIFO, UART_IIR_FIFO);
	/* Disabling the FIFOs clears the IIR top bits. */
	uart_write(&u, UART_IIR_FCR, 0);
	ck_assert_uint_eq(uart_read(&u, UART_IIR_FCR), UART_IIR_NO_INT);
}
END_TEST

START_TEST(fcr_clear_drops_rdi)
{
	uart_write(&u, UART_IER, UART_IER_RDI);
	uart_receive(&u, (const uint8_t *)"zz", 2);
	ck_assert_int_eq(r.levels[r.nirq - 1], 1);
	uart_write(&u, UART_IIR_FCR, UART_FCR_CLEAR_RCVR);
	ck_assert_int_eq(r.levels[r.nirq - 1], 0);
	/* The ring restarts cleanly after a clear. */
	uart_receive(&u, (const uint8_t *)"12", 2);
	ck_assert_uint_eq(uart_read(&u, UART_RBR_THR), '1');
	ck_assert_uint_eq(uart_read(&u, UART_RBR_THR), '2');
}
END_TEST

START_TEST(loopback_tx_goes_to_rx)
{
	uart_write(&u, UART_MCR, UART_MCR_LOOP | 0x0b);
	uart_write(&u, UART_RBR_THR, 'L');
	uart_write(&u, UART_RBR_THR, 'B');
	ck_assert_uint_eq(r.ntx, 0);
	ck_assert_uint_eq(uart_read(&u, UART_LSR) & UART_LSR_DR, UART_LSR_DR);
	ck_assert_uint_eq(uart_read(&u, UART_RBR_THR), 'L');
	ck_assert_uint_eq(uart_read(&u, UART_RBR_THR), 'B');
	/* Leaving loopback transmits again. */
	uart_write(&u, UART_MCR, 0x0b);
	uart_write(&u, UART_RBR_THR, 'T');
	ck_assert_uint_eq(r.ntx, 1);
	ck_assert_uint_eq(r.tx[0], 'T');
	ck_assert_uint_eq(uart_read(&u, UART_LSR) & UART_LSR_DR, 0);
}
END_TEST

START_TEST(loopback_msr)
{
	uart_write(&u, UART_MCR, 0x1f);
	ck_assert_uint_eq(uart_read(&u, UART_MCR), 0x1f);
	ck_assert_uint_eq(uart_read(&u, UART_MSR) & 0xf0, 0xf0);
	uart_write(&u, UART_MCR, UART_MCR_LOOP);
	ck_assert_uint_eq(uart_read(&u, UART_MSR) & 0xf0, 0x00);
	uart_write(&u, UART_MCR, UART_MCR_LOOP | 0x01);	/* DTR -> DSR */
	ck_assert_uint_eq(uart_read(&u, UART_MSR) & 0xf0, 0x20);
	uart_write(&u, UART_MCR, UART_MCR_LOOP | 0x02);	/* RTS -> CTS */
	ck_assert_uint_eq(uart_read(&u, UART_MSR) & 0xf0, 0x10);
	uart_write(&u, UART_MCR, UART_MCR_LOOP | 0x04);	/* OUT1 -> RI */
	ck_assert_uint_eq(uart_read(&u, UART_MSR) & 0xf0, 0x40);
	uart_write(&u, UART_MCR, UART_MCR_LOOP | 0x08);	/* OUT2 -> DCD */
	ck_assert_uint_eq(uart_read(&u, UART_MSR) & 0xf0, 0x80);
	/* Out of loopback the modem lines look like a connected terminal. */
	uart_write(&u, UART_MCR, 0x00);
	ck_assert_uint_eq(uart_read(&u, UART_MSR), 0xb0);
	/* MCR keeps only its five defined bits. */
	uart_write(&u, UART_MCR, 0xff);
	ck_assert_uint_eq(uart_read(&u, UART_MCR), 0x1f);
}
END_TEST

START_TEST(scratch_roundtrip)
{
	unsigned v;

	for (v = 0; v < 256; v++) {
		uart_write(&u, UART_SCR, (uint8_t)v);
		ck_assert_uint_eq(uart_read(&u, UART_SCR), v);
	}
	ck_assert_uint_eq(r.ntx, 0);
	ck_assert_uint_eq(r.nirq, 0);
}
END_TEST

START_TEST(read_only_and_bad_offsets)
{
	uart_write(&u, UART_LSR, 0x00);
	uart_write(&u, UART_MSR, 0x00);
	ck_assert_uint_eq(uart_read(&u, UART_LSR), UART_LSR_THRE | UART_LSR_TEMT);
	ck_assert_uint_eq(uart_read(&u, UART_MSR), 0xb0);
	ck_assert_uint_eq(uart_read(&u, 8), 0xff);
	uart_write(&u, 8, 0x42);
	ck_assert_uint_eq(r.ntx, 0);
}
END_TEST

START_TEST(irq_only_on_level_changes)
{
	unsigned i;

	uart_write(&u, UART_IER, UART_IER_THRI | UART_IER_RDI);	/* up */
	uart_receive(&u, (const uint8_t *)"abc", 3);			/* stays up */
	uart_write(&u, UART_SCR, 1);
	uart_read(&u, UART_LSR);
	uart_read(&u, UART_RBR_THR);
	uart_read(&u, UART_RBR_THR);
	uart_read(&u, UART_RBR_THR);		/* THRI still pending: up */
	uart_read(&u, UART_IIR_FCR);		/* ack THRI: down */
	uart_read(&u, UART_IIR_FCR);
	uart_read(&u, UART_LSR);
	uart_write(&u, UART_RBR_THR, 'x');	/* up */
	uart_write(&u, UART_RBR_THR, 'y');	/* still up */
	ck_assert_uint_eq(r.nirq, 3);
	ck_assert_int_eq(r.levels[0], 1);
	ck_assert_int_eq(r.levels[1], 0);
	ck_assert_int_eq(r.levels[2], 1);
	for (i = 1; i < r.nirq; i++)
		ck_assert_int_ne(r.levels[i], r.levels[i - 1]);
}
END_TEST

/* A template's UART: registers, FIFO and the THRE latch come back, with the line. */
START_TEST(save_restore)
{
	uint8_t st[UART_STATE_LEN];
	struct uart b;
	struct rec rb = { .ntx = 0 };

	uart_write(&u, UART_LCR, 0x03);
	uart_write(&u, UART_SCR, 0x5a);
	uart_write(&u, UART_IER, UART_IER_RDI | UART_IER_THRI);
	ck_assert_uint_eq(uart_receive(&u, (const uint8_t *)"abc", 3), 3);
	ck_assert_uint_eq(uart_read(&u, UART_RBR_THR), 'a');
	uart_save(&u, st);
	uart_init(&b, rec_tx, rec_irq, &rb);
	ck_assert_int_eq(uart_restore(&b, st), 0);
	ck_assert_uint_eq(uart_read(&b, UART_LCR), 0x03);
	ck_assert_uint_eq(uart_read(&b, UART_SCR), 0x5a);
	ck_assert_uint_eq(uart_read(&b, UART_IER), UART_IER_RDI | UART_IER_THRI);
	/* The interrupt line is driven again: data is waiting. */
	ck_assert_uint_ge(rb.nirq, 1);
	ck_assert_int_eq(rb.levels[rb.nirq - 1], 1);
	ck_assert_uint_eq(uart_read(&b, UART_RBR_THR), 'b');
	ck_assert_uint_eq(uart_read(&b, UART_RBR_THR), 'c');
	/* Nonsense in the saved bytes is refused. */
	st[8 + UART_FIFO_SIZE] = UART_FIFO_SIZE + 1;
	ck_assert_int_eq(uart_restore(&b, st), -EINVAL);
}
END_TEST

Suite *uart_suite(void)
{
	Suite *s = suite_create("uart");
	TCase *tc = tcase_create("uart");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, reset_state);
	tcase_add_test(tc, thr_write_transmits);
	tcase_add_test(tc, lsr_always_transmitter_empty);
	tcase_add_test(tc, no_callbacks_is_safe);
	tcase_add_test(tc, dlab_divisor_latches);
	tcase_add_test(tc, dlab_read_does_not_pop_fifo);
	tcase_add_test(tc, ier_masks_reserved_bits);
	tcase_add_test(tc, thri_raised_on_enable_and_acked_by_iir);
	tcase_add_test(tc, thri_reraised_by_thr_write);
	tcase_add_test(tc, thri_not_rewritten_if_already_enabled);
	tcase_add_test(tc, thri_masked_by_ier);
	tcase_add_test(tc, receive_sets_dr_and_rdi);
	tcase_add_test(tc, receive_with_rdi_enabled_raises);
	tcase_add_test(tc, rdi_has_priority_over_thri);
	tcase_add_test(tc, rbr_pops_in_order);
	tcase_add_test(tc, fifo_capacity);
	tcase_add_test(tc, loopback_overrun_sets_oe);
	tcase_add_test(tc, overrun_raises_rlsi);
	tcase_add_test(tc, fcr_enable_and_clear);
	tcase_add_test(tc, fcr_clear_drops_rdi);
	tcase_add_test(tc, loopback_tx_goes_to_rx);
	tcase_add_test(tc, loopback_msr);
	tcase_add_test(tc, scratch_roundtrip);
	tcase_add_test(tc, read_only_and_bad_offsets);
	tcase_add_test(tc, irq_only_on_level_changes);
	tcase_add_test(tc, save_restore);
	suite_add_tcase(s, tc);
	return s;
}
